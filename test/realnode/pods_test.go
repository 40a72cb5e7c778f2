//go:build linux

package realnode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// TestPods: pods that kubelet and containerd start get the master's addresses through the
// installed CNI configuration; kubelet's readiness probes reach them from the node; they
// reach each other on the same node and across nodes, and a hostNetwork pod; kubectl exec
// and logs work (the API server reaches every kubelet); init containers run first.
func TestPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "pods")
	n1, n2 := cl.Nodes[0], cl.Nodes[1]
	create(ctx, t, netexec(ns, "web-1", n1.Name, 8080, false))
	create(ctx, t, netexec(ns, "web-2", n2.Name, 8080, false))
	create(ctx, t, netexec(ns, "host-2", n2.Name, 8082, true))
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: n1.Name,
			InitContainers: []corev1.Container{{Name: "init", Image: images.Busybox,
				Command:      []string{"sh", "-c", "echo initialised > /work/init"},
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}}},
			Containers: []corev1.Container{{Name: "c", Image: images.Busybox, Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}}},
			Volumes:                       []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	create(ctx, t, client)
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"web-1", "web-2", "host-2", "client"} {
		pods[name] = waitReady(ctx, t, ns, name)
	}
	for _, name := range []string{"web-1", "web-2", "client"} {
		p := pods[name]
		pn, err := contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey])
		if err != nil || len(pn.IPs) != 1 || p.Status.PodIP != pn.IPs[0].Addr().String() {
			t.Errorf("%s: status IP %s, the master's annotation %v (%v)", name, p.Status.PodIP, pn.IPs, err)
		}
	}
	if ip := pods["host-2"].Status.PodIP; ip != n2.IP {
		t.Errorf("hostNetwork pod on %s has IP %s, want the node's %s", n2.Name, ip, n2.IP)
	}

	if out := kubectl(ctx, t, "exec", "-n", ns, "client", "-c", "c", "--", "cat", "/work/init"); strings.TrimSpace(out) != "initialised" {
		t.Errorf("the init container's file: %q", out)
	}
	for _, target := range []struct{ what, url, want string }{
		{"same node", fmt.Sprintf("http://%s:8080/hostname", pods["web-1"].Status.PodIP), "web-1"},
		{"other node", fmt.Sprintf("http://%s:8080/hostname", pods["web-2"].Status.PodIP), "web-2"},
		{"hostNetwork pod", fmt.Sprintf("http://%s:8082/hostname", n2.IP), ""},
	} {
		// Not wget -T: Debian's busybox-static wget crashes with it (exit 139).
		out := kubectl(ctx, t, "exec", "-n", ns, "client", "-c", "c", "--", "timeout", "5", "wget", "-q", "-O", "-", target.url)
		if strings.TrimSpace(out) == "" || (target.want != "" && strings.TrimSpace(out) != target.want) {
			t.Errorf("client -> %s (%s): %q, want %q", target.what, target.url, out, target.want)
		}
	}
	if out := kubectl(ctx, t, "logs", "-n", ns, "web-2"); !strings.Contains(out, "8080") {
		t.Errorf("kubectl logs web-2: %q, want netexec's start-up line naming port 8080", out)
	}
}

func netexec(ns, name, node string, port int, hostNetwork bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			HostNetwork: hostNetwork,
			Containers: []corev1.Container{{
				Name: "netexec", Image: images.Agnhost,
				Args:  []string{"netexec", fmt.Sprintf("--http-port=%d", port), "--udp-port=-1"},
				Ports: []corev1.ContainerPort{{ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/hostname", Port: intstr.FromInt32(int32(port))}},
					PeriodSeconds: 1,
				},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

func namespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	_, err := cl.Kube.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func create(ctx context.Context, t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := cl.Kube.Client().CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for kubelet to report the pod Ready and returns it.
func waitReady(ctx context.Context, t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return cl.WaitPodReady(ctx, t, ns, name, 2*time.Minute)
}

// kubectlCmd is the real kubectl against the cluster, with args.
func kubectlCmd(ctx context.Context, args ...string) (*exec.Cmd, error) {
	dir, err := harness.EnsureKubeBinaries(ctx, harness.KubeVersion, nil)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", cl.Kube.Kubeconfig}, args...)...), nil
}

// kubectl runs kubectl and returns its output; a failure fails the test.
func kubectl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := runKubectl(ctx, args...)
	if err != nil {
		t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// runKubectl runs kubectl and returns its output and error.
func runKubectl(ctx context.Context, args ...string) (string, error) {
	cmd, err := kubectlCmd(ctx, args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podExec runs a command in the pod's first container through kubectl exec (API server ->
// kubelet -> containerd).
func podExec(ctx context.Context, ns, pod string, cmd ...string) (string, error) {
	return runKubectl(ctx, append([]string{"exec", "-n", ns, pod, "--"}, cmd...)...)
}

// clientPod is an agnhost pod named "client" on node, idle, for commands run in it.
func clientPod(ns, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: images.Agnhost, Args: []string{"pause"}}}},
	}
}
