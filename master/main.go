// Command ovnt-master keeps the OVN Northbound database equal to what the cluster's Nodes,
// Pods, Namespaces, Services, EndpointSlices and NetworkPolicies imply.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-master:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return cliapp.New("ovnt-master", "keep OVN Northbound in step with the Kubernetes cluster", flags(), run)
}

func run(c *cli.Context) error {
	cfg, err := configFrom(c)
	if err != nil {
		return err
	}
	if err := setUpLogging(cfg.Verbosity); err != nil {
		return err
	}
	if cfg.MemoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// Soft: a larger live heap still grows past it; below it, the collector runs
		// before the heap doubles, which is most of a controller's resident size.
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMaster(ctx, cfg, klog.Background().WithName("ovnt-master"))
}
