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
	if cfg.GCPercent > 0 && os.Getenv("GOGC") == "" {
		// Go's default lets the heap double between collections, which is most of a
		// controller's resident size; 50 costs little CPU (make bench-services: 153 MiB at
		// 100, about 120 MiB at 50, 5,000 Services). A soft memory limit instead made the
		// collector run nonstop once the live heap passed it (make bench-netpol: cold start
		// 18.6 s at an 80 MiB limit, 7.2 s at 50 percent).
		debug.SetGCPercent(cfg.GCPercent)
	}
	if cfg.MemoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMaster(ctx, cfg, klog.Background().WithName("ovnt-master"))
}
