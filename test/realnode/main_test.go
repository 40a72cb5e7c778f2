//go:build linux

// Package realnode runs pods the way users run them: the real kubelet and Debian's
// containerd on every node call the CNI configuration the node agent installed, with images
// built here under their upstream names. The oracle is what kubelet and kubectl report and
// what the pods themselves can reach.
package realnode

import (
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

func TestMain(m *testing.M) {
	os.Exit(cluster.RunTests(m, cluster.MainOptions{
		Name:     "realnode",
		Cluster:  cluster.Options{RealNodes: true},
		Programs: []string{"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"},
		Timeout:  5 * time.Minute,
		Started:  func(r *harness.Run, c *cluster.Cluster) { run, cl = r, c },
		Logf:     logf,
	}))
}

var logf = cluster.Logf
