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
	"strconv"
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
		// Three schedulable nodes by default: several upstream tests place pods on two
		// different nodes and need a third to stay out of their way (HostPort, session
		// affinity). Zones a, b, c in turn: the Topology Hints and Traffic Distribution
		// tests skip themselves on a cluster with fewer than three zones, and three of them
		// need two nodes in each (OVNT_UPSTREAM_NODES=6; docs/upstream-e2e.md).
		Cluster:  upstreamCluster(),
		Programs: []string{"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"},
		Timeout:  8 * time.Minute,
		Started:  func(r *harness.Run, c *cluster.Cluster) { run, cl = r, c },
		Logf:     logf,
	}))
}

var logf = cluster.Logf

// upstreamCluster is the test cluster of OVNT_UPSTREAM_NODES real nodes (3 unless set),
// node<i> in zone-a, zone-b, zone-c in turn, those OVNT_UPSTREAM_REMOTE names remote chassis.
func upstreamCluster() cluster.Options {
	n := 3
	if v := os.Getenv("OVNT_UPSTREAM_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 3 {
			logf("OVNT_UPSTREAM_NODES=%q: want a node count of at least 3; running 3", v)
			n = 3
		}
	}
	o := cluster.Options{RealNodes: true, RemoteNodes: remoteNodes(os.Getenv("OVNT_UPSTREAM_REMOTE")),
		Zones: map[string]string{}}
	for i := 1; i <= n; i++ {
		name := "node" + strconv.Itoa(i)
		o.Nodes = append(o.Nodes, name)
		o.Zones[name] = "zone-" + string(rune('a'+(i-1)%3))
	}
	return o
}

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
