//go:build linux

// Package realnode runs pods the way users run them: the real kubelet and Debian's
// containerd on every node call the CNI configuration the node agent installed, with images
// built here under their upstream names. The oracle is what kubelet and kubectl report and
// what the pods themselves can reach.
package realnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

var (
	run *harness.Run
	cl  *cluster.Cluster
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if flag.Parse(); testing.Short() {
		fmt.Fprintln(os.Stderr, "realnode: integration tier, not run under -short (make test-unit)")
		return 0
	}
	if missing := harness.Missing("ovsdb-server", "ovs-vswitchd", "ovn-controller", "ovn-northd", "etcd", "ip",
		"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "realnode: prerequisites missing on CI: %v\n", missing)
			return 1
		}
		fmt.Fprintf(os.Stderr, "realnode: skipping, prerequisites missing: %v (run make test as root)\n", missing)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if run, err = harness.NewRun(harness.Options{Logf: logf}); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	start := time.Now()
	cl, err = cluster.Start(ctx, run, cluster.Options{RealNodes: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: starting the cluster:", err)
		run.MarkFailed()
		run.Close()
		return 1
	}
	logf("realnode: cluster of kubelets up in %s", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		run.MarkFailed()
	}
	if err := run.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}
