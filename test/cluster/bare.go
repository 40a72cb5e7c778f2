//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// BareHostPaths are the host paths the manifests' Linux pods mount, and where each is on a
// bare node (Options.Bare), relative to the node's directory: one machine holds every node,
// so each node's kubelet and containerd see these paths as directories of their own. The
// Open vSwitch run directory is the node's directory itself (harness.Node.Dir), so that
// Node.VSCtl and Node.OFCtl reach the Open vSwitch the DaemonSet starts there.
var BareHostPaths = map[string]string{
	"/var/run/openvswitch":     ".",
	"/etc/openvswitch":         "host/etc-openvswitch",
	"/var/log/openvswitch":     "host/log-openvswitch",
	"/var/run/ovn":             "host/run-ovn",
	"/var/run/ovn-transparent": "host/run-ovn-transparent",
	"/var/run/netns":           "host/netns",
	"/opt/cni/bin":             "cni/bin",
	"/etc/cni/net.d":           "cni/net.d",
	"/etc/ovn-transparent/pki": "host/pki",
	// The kernel of these machines has no modules; the ovs container mounts the directory.
	"/lib/modules": "host/modules",
}

// bareMountns makes n's mount namespace and returns the path of its namespace file: the
// root mount namespace's mounts, made shared within it (kubelet's HostToContainer volumes
// need shared mounts; the root namespace is not affected), with BareHostPaths bound onto
// the node's directories. The mount points are created on the machine when missing (empty
// directories). The namespace lives until its file is unmounted and its processes exit.
func (c *Cluster) bareMountns(ctx context.Context, n *Node) (string, error) {
	nsDir := filepath.Join(n.Dir, "k", "ns")
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		return "", err
	}
	// A namespace file must be on a private mount, or the new namespace would hold a
	// reference to itself.
	for _, args := range [][]string{{"--bind", nsDir, nsDir}, {"--make-private", nsDir}} {
		if out, err := exec.CommandContext(ctx, "mount", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("mount %v: %w: %s", args, err, out)
		}
	}
	file := filepath.Join(nsDir, "mnt")
	// The node's teardown (realNode.cleanup) unmounts everything under its directory, these
	// two included; this is for a start that failed before it: errors mean "not mounted".
	c.Run.AddCleanup("mount namespace of "+n.Name, func() error {
		exec.Command("umount", "-l", file).Run()
		exec.Command("umount", "-l", nsDir).Run()
		return nil
	})
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		return "", err
	}
	script := []string{"set -e", "mount --make-rshared /"}
	for dst, rel := range BareHostPaths {
		src := filepath.Join(n.Dir, rel)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", err
		}
		script = append(script, fmt.Sprintf("mkdir -p %[2]s; mount --bind %[1]s %[2]s; mount --make-shared %[2]s", src, dst))
	}
	cmd := exec.CommandContext(ctx, "unshare", "--mount="+file, "--propagation", "private", "sh", "-c", strings.Join(script, "\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mount namespace of %s: %w: %s", n.Name, err, out)
	}
	return file, nil
}

// Mountns is the path of the node's own mount namespace (Options.Bare), else empty.
func (n *Node) Mountns() string {
	if n.real == nil {
		return ""
	}
	return n.real.mountns
}

// waitNodesRegistered waits until every node's kubelet has registered its Node.
func (c *Cluster) waitNodesRegistered(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := poll.Until(ctx, "node "+n.Name+" registered", 100*time.Millisecond, func() (bool, error) {
			_, err := c.Kube.Client().CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// ImportImage imports a docker archive into every node's containerd, as the images the
// cluster builds itself are (with Options.RealNodes).
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	for _, n := range c.Nodes {
		if n.real == nil {
			return fmt.Errorf("node %s has no containerd (Options.RealNodes)", n.Name)
		}
		if out, err := n.real.ctr(ctx, "-n", "k8s.io", "images", "import", archive); err != nil {
			return fmt.Errorf("node %s: importing %s: %w: %s", n.Name, filepath.Base(archive), err, out)
		}
	}
	return nil
}
