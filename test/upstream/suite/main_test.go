//go:build linux

// Package suite runs the upstream Kubernetes e2e suite (e2e.test of harness.KubeVersion,
// with ginkgo) against a test cluster of real kubelet and containerd nodes running
// ovn-transparent: the [sig-network] Conformance tests, the NetworkPolicy tests and the
// wider [sig-network] set, leaving out only what test/upstream/not-applicable.txt lists with
// a reason. `make test` runs the Conformance set (OVNT_UPSTREAM_SETS unset), `make
// conformance-k8s` all three; see docs/upstream-e2e.md.
package suite

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

var (
	run *harness.Run
	cl  *cluster.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(cluster.RunTests(m, cluster.MainOptions{
		Name: "upstream e2e",
		// Three schedulable nodes: several upstream tests place pods on two different
		// nodes and need a third to stay out of their way (HostPort, session affinity).
		// One zone each: the Topology Hints and Traffic Distribution tests skip themselves
		// on a cluster with fewer than three zones (docs/upstream-e2e.md).
		Cluster: cluster.Options{RealNodes: true, Nodes: []string{"node1", "node2", "node3"},
			RemoteNodes: remoteNodes(os.Getenv("OVNT_UPSTREAM_REMOTE")),
			Zones:       map[string]string{"node1": "zone-a", "node2": "zone-b", "node3": "zone-c"}},
		Programs: []string{"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"},
		Timeout:  8 * time.Minute,
		Started:  func(r *harness.Run, c *cluster.Cluster) { run, cl = r, c },
		Logf:     logf,
	}))
}

var logf = cluster.Logf

// remoteNodes are the nodes OVNT_UPSTREAM_REMOTE names (comma-separated, e.g. "node2"): they
// run as remote chassis (docs/remote-chassis.md), their ovn-controller on a host of its own.
func remoteNodes(names string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			m[n] = true
		}
	}
	return m
}
