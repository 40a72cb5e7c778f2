//go:build linux

package deployreal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// nodeMachineImages writes the image archives a node machine's containerd imports (pause,
// agnhost) and returns their paths.
func nodeMachineImages(ctx context.Context, r *harness.Run, bin, kubeBin string) ([]string, error) {
	coredns, err := harness.EnsureCoreDNS(ctx, r.Logf)
	if err != nil {
		return nil, err
	}
	dir := r.Path("images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	all, err := images.Write(dir, images.Sources{
		Pause: filepath.Join(bin, "pause"), Busybox: "/bin/busybox", Agnhost: filepath.Join(kubeBin, "agnhost"),
		CoreDNS: coredns, Workload: filepath.Join(bin, "ovnt-workload"),
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range all {
		if strings.Contains(p, "pause") || strings.Contains(p, "agnhost") {
			out = append(out, p)
		}
	}
	return out, nil
}

// installKubelet gives node machine m what an operator's cluster has on a node before
// ovn-transparent: containerd and runc (this host's Debian packages' binaries, the same
// release as the machine), the loopback CNI plugin, kubelet, the images, and their units,
// started. kubeconfig reaches the API server from the machine. containerd's state is on a
// tmpfs: its overlay snapshots cannot have the machine's overlay root as their upper layer.
func installKubelet(ctx context.Context, t *testing.T, r *harness.Run, a *controller, m *machine, kubeBin, kubeconfig string, archives []string) {
	t.Helper()
	cg := r.Name("kubelet-" + m.name)
	copies := map[string]string{
		"/usr/bin/containerd":              "usr/bin/containerd",
		"/usr/bin/containerd-shim-runc-v2": "usr/bin/containerd-shim-runc-v2",
		"/usr/bin/ctr":                     "usr/bin/ctr",
		"/usr/sbin/runc":                   "usr/sbin/runc",
		"/usr/lib/cni/loopback":            "opt/cni/bin/loopback",
		filepath.Join(kubeBin, "kubelet"):  "usr/local/bin/kubelet",
		kubeconfig:                         "etc/kubernetes/kubelet.kubeconfig",
	}
	for _, p := range archives {
		copies[p] = "var/lib/images/" + filepath.Base(p)
	}
	for src, dst := range copies {
		dst = filepath.Join(m.root, dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("%s: cp %s: %v: %s", m.name, src, err, out)
		}
	}
	files := map[string]string{
		"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + images.Pause + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`,
		"etc/kubernetes/kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: "0%%"
  imagefs.available: "0%%"
  nodefs.inodesFree: "0%%"
rotateCertificates: false
resolvConf: ""
enforceNodeAllocatable:
- pods
`, m.ip, cg),
		"etc/systemd/system/containerd.service": `[Unit]
Description=containerd
[Service]
ExecStartPre=/bin/mkdir -p /var/lib/containerd
ExecStartPre=/bin/sh -c 'mountpoint -q /var/lib/containerd || mount -t tmpfs tmpfs /var/lib/containerd'
ExecStart=/usr/bin/containerd
Delegate=yes
KillMode=process
[Install]
WantedBy=multi-user.target
`,
		"etc/systemd/system/kubelet.service": `[Unit]
Description=kubelet
After=containerd.service
[Service]
ExecStart=/usr/local/bin/kubelet --config /etc/kubernetes/kubelet.yaml --kubeconfig /etc/kubernetes/kubelet.kubeconfig --hostname-override ` + m.name + ` --node-ip ` + m.ip + `
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
`,
	}
	for p, content := range files {
		path := filepath.Join(m.root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// kubelet's cgroup root, in every hierarchy the machine has mounted (its systemd mounts
	// some the host has not); the run's teardown kills what is left in those of the host.
	a.ssh(ctx, m, "set -e; for h in /sys/fs/cgroup/*/; do mountpoint -q ${h%/} || continue; mkdir -p ${h}"+cg+"; "+
		"for f in cpuset.cpus cpuset.mems; do if [ -f $h$f ]; then cat $h$f > ${h}"+cg+"/$f; fi; done; done")
	a.ssh(ctx, m, "systemctl daemon-reload && systemctl enable --now containerd && "+
		"for i in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done && "+
		"for f in /var/lib/images/*.tar; do ctr -n k8s.io images import $f >/dev/null || exit 1; done && "+
		"systemctl enable --now kubelet")
}
