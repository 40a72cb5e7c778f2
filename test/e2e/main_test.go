//go:build linux

// Package e2e holds the end-to-end tests: one real cluster (control plane, OVN, the real
// ovnt-master, ovnt-node and ovnt-cni binaries, the real kubelet and containerd on every
// node) per test binary, and real packets between network namespaces as the oracle.
package e2e

import (
	"context"
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
	os.Exit(cluster.RunTests(m, cluster.MainOptions{
		Name: "e2e",
		// node3 is only for TestNodeDeleted, which takes it out of the cluster. node4 is a
		// remote chassis (remote_test.go): its ovn-controller runs on a host of its own, under
		// `ovnt-node remote-controllers`.
		Cluster: cluster.Options{Nodes: []string{"node1", "node2", "node3", remoteNode}, RealNodes: true,
			RemoteNodes: map[string]bool{remoteNode: true}, RemoteManager: true,
			// One zone per node (TestServiceTopologyHints); the remote node has none.
			Zones: map[string]string{"node1": "zone-a", "node2": "zone-b", "node3": "zone-c"},
			// The harness's OVN central host (TestOVNCentralTLS), and the external host standing
			// in for another central member whose ports have listeners the test controls
			// (TestControlPlaneFromPods).
			MasterArgs: []string{"--control-plane-addresses=" + harness.CentralIP + "," + harness.ExternalHostIP}},
		Programs: []string{"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"},
		Timeout:  10 * time.Minute,
		Started:  func(r *harness.Run, c *cluster.Cluster) { run, cl = r, c },
		Failed:   dumpOVN,
		Logf:     logf,
	}))
}

var logf = cluster.Logf

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
