//go:build linux

// Package e2e holds the end-to-end tests: one real cluster (control plane, OVN, the real
// ovnt-master, ovnt-node and ovnt-cni binaries, kubelet stand-ins) per test binary, and real
// packets between network namespaces as the oracle.
package e2e

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

// The cluster every test of the package shares; tests use their own namespaces.
var (
	run *harness.Run
	cl  *cluster.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if flag.Parse(); testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: integration tier, not run under -short (make test-unit)")
		return 0
	}
	if missing := harness.Missing("ovsdb-server", "ovs-vswitchd", "ovn-controller", "ovn-northd", "etcd", "ip"); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "e2e: prerequisites missing on CI: %v\n", missing)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: skipping, prerequisites missing: %v (run make test as root)\n", missing)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	run, err = harness.NewRun(harness.Options{Logf: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	// node3 is only for TestNodeDeleted, which takes it out of the cluster.
	cl, err = cluster.Start(ctx, run, cluster.Options{Nodes: []string{"node1", "node2", "node3"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		run.MarkFailed()
		run.Close()
		return 1
	}
	logf("e2e: cluster up in %s", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		dumpOVN()
		run.MarkFailed()
	}
	if err := run.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// dumpOVN prints what an operator would look at first when something failed.
func dumpOVN() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range [][]string{
		{"nb", "show"}, {"nb", "lr-route-list", "ovn_cluster_router"}, {"nb", "--columns=name,external_ids", "list", "Logical_Router_Port"},
		{"sb", "show"}, {"sb", "--columns=logical_port,chassis,up", "list", "Port_Binding"},
	} {
		ctl := cl.Central.NBCtl
		if q[0] == "sb" {
			ctl = cl.Central.SBCtl
		}
		out, err := ctl(ctx, q[1:]...)
		fmt.Fprintf(os.Stderr, "===== ovn-%sctl %v (err %v)\n%s\n", q[0], q[1:], err, out)
	}
}
