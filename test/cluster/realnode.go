//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// ClusterDNS is the ClusterIP kubelets give pods as their resolver (the kube-dns Service).
const ClusterDNS = "10.96.0.10"

// realNode is what runs a node's pods when the cluster has real nodes: Debian's containerd
// with runc and the real kubelet, both in the node's network namespace but in the root mount
// namespace (they must see each other's mounts), each with directories of its own so that
// two nodes on one machine never touch each other's pods, logs or cgroups.
type realNode struct {
	dir        string // <node dir>/k
	socket     string // containerd's CRI socket
	cgroupRoot string
	containerd *harness.Proc
	kubelet    *harness.Proc
	// mountns is the node's own mount namespace (Options.Bare), else empty: the root one.
	mountns string
}

// startRealNode starts containerd, imports the images, and starts kubelet, which registers
// the Node and keeps it Ready while containerd's CNI network is (the agent's installed
// configuration).
func (c *Cluster) startRealNode(ctx context.Context, n *Node) (err error) {
	rn := &realNode{dir: filepath.Join(n.Dir, "k"), cgroupRoot: "/" + c.Run.Name(n.Name)}
	rn.socket = filepath.Join(rn.dir, "containerd.sock")
	for _, d := range []string{"ctd-root", "ctd-state", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(rn.dir, d), 0o755); err != nil {
			return err
		}
	}
	n.real = rn
	cniBin, cniConf := filepath.Join(n.CNIDir, "bin"), filepath.Join(n.CNIDir, "net.d")
	if c.opts.Bare {
		if rn.mountns, err = c.bareMountns(ctx, n); err != nil {
			return err
		}
		cniBin, cniConf = "/opt/cni/bin", "/etc/cni/net.d"
	}
	// containerd's CRI sets up every sandbox's loopback with the "loopback" plugin from its
	// plugin directory, as on every node: Debian's containernetworking-plugins has it.
	if err := os.Symlink("/usr/lib/cni/loopback", filepath.Join(n.CNIDir, "bin", "loopback")); err != nil && !os.IsExist(err) {
		return err
	}
	if err := os.WriteFile(filepath.Join(rn.dir, "containerd.toml"), []byte(rn.containerdConfig(cniBin, cniConf, !c.opts.Bare)), 0o644); err != nil {
		return err
	}
	// A host-network pod shares its node's UTS namespace, which is containerd's (its shims and
	// runc inherit it): on one machine every node's would be the machine's, so containerd
	// runs in a UTS namespace of its own named after the node, as a host-network pod's
	// hostname is its node's on a real machine (upstream tests compare the two). unshare and
	// sh exec in place: the process stopped is containerd.
	rn.containerd, err = c.Run.Start(harness.ProcSpec{Name: "containerd-" + n.Name, Netns: n.Netns, HostMounts: true, Mountns: rn.mountns,
		Path: "unshare", Args: []string{"--uts", "sh", "-c", `hostname "$0" && exec containerd --config "$1"`, n.Name, filepath.Join(rn.dir, "containerd.toml")},
		StopTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	// Teardown (LIFO, before the processes stop): kubelet first, so it restarts nothing,
	// then every container, then the mounts and cgroups the pods left.
	c.Run.AddCleanup("pods of "+n.Name, rn.cleanup)
	if err := poll.Until(ctx, "containerd of "+n.Name, 50*time.Millisecond, func() (bool, error) {
		_, err := rn.ctr(ctx, "version")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	archives, err := c.imageArchives(ctx)
	if err != nil {
		return err
	}
	for _, a := range archives {
		if out, err := rn.ctr(ctx, "-n", "k8s.io", "images", "import", a); err != nil {
			return fmt.Errorf("importing %s: %w: %s", filepath.Base(a), err, out)
		}
	}
	if err := createCgroup(rn.cgroupRoot); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rn.dir, "kubelet.yaml"), []byte(rn.kubeletConfig(c, n)), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config", filepath.Join(rn.dir, "kubelet.yaml"),
		"--kubeconfig", n.Kubeconfig,
		"--root-dir", filepath.Join(rn.dir, "kubelet"),
		"--cert-dir", filepath.Join(rn.dir, "kubelet", "pki"),
		"--hostname-override", n.Name,
		"--node-ip", n.IP,
		"--v", "1",
	}
	if zone := c.opts.Zones[n.Name]; zone != "" {
		args = append(args, "--node-labels", corev1.LabelTopologyZone+"="+zone)
	}
	rn.kubelet, err = c.Run.Start(harness.ProcSpec{Name: "kubelet-" + n.Name, Netns: n.Netns, HostMounts: true, Mountns: rn.mountns,
		Path: filepath.Join(c.kubeBinDir, "kubelet"), Args: args, StopTimeout: 10 * time.Second})
	return err
}

func (rn *realNode) ctr(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", rn.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// containerdConfig is the node's containerd: its own root, state and sockets; the CRI plugin
// with the upstream pause image as the sandbox, the CNI directories the agent installs into,
// runc with cgroupfs, network namespaces under its state directory (inside the run) unless
// the node has a mount namespace of its own (then in /var/run/netns, as on a host), and
// OOM score adjustments limited to what this machine allows.
func (rn *realNode) containerdConfig(cniBin, cniConf string, netnsUnderState bool) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = %[5]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[7]q
  netns_mounts_under_state_dir = %[11]t
  # These machines withhold CAP_SYS_RESOURCE: a sandbox's oom_score_adj of -998 would
  # fail runc's init; keep every container's at or above containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[10]q
`, filepath.Join(rn.dir, "ctd-root"), filepath.Join(rn.dir, "ctd-state"), rn.socket, rn.socket+".ttrpc",
		filepath.Join(rn.dir, "ctd-debug.sock"), filepath.Join(rn.dir, "ctd-opt"), images.Pause,
		cniBin, cniConf, filepath.Join(rn.dir, "runc"), netnsUnderState)
}

// kubeletConfig is the node's KubeletConfiguration: serving on the node IP with webhook
// authentication and authorization (the API server's client certificate is signed by the
// cluster CA), cgroupfs under a cgroup root of its own (this machine is cgroup v1), its own
// pod log directory, cluster DNS, and no image garbage collection: the images were built
// here and cannot be pulled again.
func (rn *realNode) kubeletConfig(c *Cluster, n *Node) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[2]s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
podLogsDir: %[5]s
clusterDNS:
- %[6]s
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: "0%%"
  imagefs.available: "0%%"
  nodefs.inodesFree: "0%%"
serializeImagePulls: false
maxPods: 110
rotateCertificates: false
enforceNodeAllocatable:
- pods
`, n.IP, c.Kube.CAFile, rn.cgroupRoot, rn.socket, filepath.Join(rn.dir, "pod-logs"), ClusterDNS)
}

// cleanup stops kubelet, kills and removes every container, and releases the mounts and
// cgroups the pods left behind.
func (rn *realNode) cleanup() error {
	if rn.kubelet != nil {
		rn.kubelet.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := rn.ctr(ctx, "-n", "k8s.io", "tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			rn.ctr(ctx, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
		}
		for _, id := range strings.Fields(out) {
			rn.ctr(ctx, "-n", "k8s.io", "tasks", "delete", "-f", id)
		}
	}
	if out, err := rn.ctr(ctx, "-n", "k8s.io", "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			rn.ctr(ctx, "-n", "k8s.io", "containers", "delete", id)
		}
	}
	unmountUnder(rn.dir)
	return removeCgroup(rn.cgroupRoot)
}

// cgroupHierarchies are the cgroup v1 hierarchies mounted on this machine.
func cgroupHierarchies() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// createCgroup makes the kubelet's cgroup root in every hierarchy (kubelet refuses a root
// that does not exist); cpuset needs its CPUs and memory nodes before it takes tasks.
func createCgroup(root string) error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", d, err)
				}
			}
		}
	}
	return nil
}

// removeCgroup removes the cgroup root's tree in every hierarchy, deepest first. A task still
// in it (a container process that its SIGKILL has not ended yet, or one the runtime no longer
// lists) is killed, and the removal tried again for up to ten seconds; what stays is reported.
func removeCgroup(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := removeCgroupOnce(root)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups left: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeCgroupOnce kills the tasks of root's tree and removes its directories, deepest
// first; it returns those that stayed.
func removeCgroupOnce(root string) []string {
	var left []string
	for _, h := range cgroupHierarchies() {
		var dirs []string
		filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			if procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(procs)) {
					if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				left = append(left, d)
			}
		}
	}
	return left
}

// unmountUnder lazily unmounts every mount point below dir, deepest first: pod volumes,
// container root filesystems, network namespaces.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		exec.Command("umount", "-l", p).Run()
	}
}

// imageArchives builds the images once per cluster (a second or two) and returns their
// archives.
func (c *Cluster) imageArchives(ctx context.Context) ([]string, error) {
	c.imagesOnce.Do(func() {
		dir := c.Run.Path("images")
		if c.imagesErr = os.MkdirAll(dir, 0o755); c.imagesErr != nil {
			return
		}
		var coredns, rootfs, nginx, boom string
		if coredns, c.imagesErr = harness.EnsureCoreDNS(ctx, c.Run.Logf); c.imagesErr != nil {
			return
		}
		if boom, c.imagesErr = harness.EnsureKubeTestImage(ctx, harness.KubeVersion, harness.RegressionIssue74839, c.Run.Logf); c.imagesErr != nil {
			return
		}
		if rootfs, c.imagesErr = harness.EnsureAgnhostRootfs(ctx, c.Run.Logf); c.imagesErr != nil {
			return
		}
		if nginx, c.imagesErr = harness.EnsureNginxRootfs(ctx, c.Run.Logf); c.imagesErr != nil {
			return
		}
		c.imagesList, c.imagesErr = images.Write(dir, images.Sources{
			Pause:         filepath.Join(c.BinDir, "pause"),
			Busybox:       "/bin/busybox",
			Agnhost:       filepath.Join(c.kubeBinDir, "agnhost"),
			AgnhostRootfs: rootfs,
			NginxRootfs:   nginx,
			CoreDNS:       coredns,
			Workload:      filepath.Join(c.BinDir, "ovnt-workload"),

			RegressionIssue74839: boom,
		})
	})
	return c.imagesList, c.imagesErr
}

// dialCluster is the API server's way to nodes and pods: from inside the namespace of the
// node that holds the address, else of the first node (pods and Services are reachable
// from every node through its management port).
func (c *Cluster) dialCluster(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	netns := ""
	for _, n := range c.Nodes {
		if netns == "" || n.IP == host {
			netns = n.Netns
		}
	}
	if netns == "" {
		return nil, fmt.Errorf("no node to dial %s from", addr)
	}
	var conn net.Conn
	err = harness.InNetns(netns, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// PodNetnsPath returns the path of the network namespace of pod namespace/name on node n:
// the kubelet stand-in's named namespace, or, on a real node, the sandbox containerd made,
// which the pod's port on br-int names (external_ids:ovnt-sandbox).
func (n *Node) PodNetnsPath(ctx context.Context, namespace, name string) (string, error) {
	if n.real == nil {
		ns, ok := n.Kubelet.PodNetns(namespace, name)
		if !ok {
			return "", fmt.Errorf("no sandbox of %s/%s on %s", namespace, name, n.Name)
		}
		return "/run/netns/" + ns, nil
	}
	// The port of this pod, not of an earlier one of the same name whose sandbox kubelet
	// has not torn down yet.
	pod, err := n.c.Kube.Client().CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	port, err := n.VSCtl(ctx, "--bare", "--columns=name", "find", "Interface",
		"external_ids:ovnt-pod="+namespace+"/"+name, "external_ids:iface-id-ver="+string(pod.UID))
	if err != nil || strings.TrimSpace(port) == "" {
		return "", fmt.Errorf("no port of %s/%s (uid %s) on %s: %q (%v)", namespace, name, pod.UID, n.Name, port, err)
	}
	out, err := n.VSCtl(ctx, "get", "Interface", strings.Fields(port)[0], "external_ids:ovnt-sandbox")
	path := strings.Trim(strings.TrimSpace(out), `"`)
	if err != nil || path == "" {
		return "", fmt.Errorf("port %s of %s/%s names no sandbox: %q (%v)", port, namespace, name, out, err)
	}
	return path, nil
}
