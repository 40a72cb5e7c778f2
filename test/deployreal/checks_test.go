//go:build linux

package deployreal

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	ovntimages "github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// workloads are the test's pods: in namespace "demo", web-a on the first node and web-b on
// the second behind the Service "web", a client on each node; in namespace "secured", a
// server only pods labelled access=yes may reach.
type workloads struct {
	c       *cluster.Cluster
	client  kubernetes.Interface
	pods    map[string]*corev1.Pod // by namespace/name
	service *corev1.Service
}

func newWorkloads(ctx context.Context, t *testing.T, c *cluster.Cluster) *workloads {
	t.Helper()
	w := &workloads{c: c, client: c.Kube.Client(), pods: map[string]*corev1.Pod{}}
	n1, n2 := c.Nodes[0].Name, c.Nodes[1].Name
	for _, ns := range []string{"demo", "secured"} {
		if _, err := w.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	webA, webB := netexec("demo", "web-a", n1), netexec("demo", "web-b", n2)
	webA.Labels["app"], webB.Labels["app"] = "web", "web"
	allowed, denied := agnhost("secured", "allowed", n1, "pause"), agnhost("secured", "denied", n1, "pause")
	allowed.Labels["access"] = "yes"
	for _, p := range []*corev1.Pod{webA, webB, agnhost("demo", "client-1", n1, "pause"), agnhost("demo", "client-2", n2, "pause"),
		netexec("secured", "server", n2), allowed, denied} {
		if _, err := w.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := w.client.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.service = svc
	for _, key := range []string{"demo/web-a", "demo/web-b", "demo/client-1", "demo/client-2", "secured/server", "secured/allowed", "secured/denied"} {
		ns, name, _ := strings.Cut(key, "/")
		w.pods[key] = c.WaitPodReady(ctx, t, ns, name, 3*time.Minute)
	}
	return w
}

// netexec is agnhost serving HTTP on 8080 (/hostname answers the pod's name).
func netexec(ns, name, node string) *corev1.Pod {
	p := agnhost(ns, name, node, "netexec", "--http-port=8080", "--udp-port=-1")
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/hostname", Port: intstr.FromInt32(8080)}}}
	return p
}

func agnhost(ns, name, node string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"pod": name}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: images.Agnhost, Args: args, ImagePullPolicy: corev1.PullNever}}},
	}
}

// exec runs a command in the pod's container through kubectl exec (API server, kubelet,
// containerd), as a user would.
func (w *workloads) exec(ctx context.Context, key string, cmd ...string) (string, error) {
	ns, name, _ := strings.Cut(key, "/")
	return kubectl(ctx, w.c, append([]string{"exec", "-n", ns, name, "--"}, cmd...)...)
}

func kubectl(ctx context.Context, c *cluster.Cluster, args ...string) (string, error) {
	dir, err := harness.EnsureKubeBinaries(ctx, harness.KubeVersion, nil)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", c.Kube.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// connects reports whether the pod key opens a TCP connection to target within 3 s.
func (w *workloads) connects(ctx context.Context, key, target string) (bool, string) {
	out, err := w.exec(ctx, key, "/agnhost", "connect", "--timeout=3s", target)
	return err == nil, out
}

// checkFlows: pods on both nodes reach each other, the Service answers from both nodes with
// a web pod's name, and a node reaches a pod.
func (w *workloads) checkFlows(ctx context.Context, t *testing.T) {
	t.Helper()
	a, b := w.pods["demo/web-a"].Status.PodIP, w.pods["demo/web-b"].Status.PodIP
	for _, f := range []struct{ from, to, what string }{
		{"demo/client-1", a + ":8080", "pod -> pod, same node"},
		{"demo/client-1", b + ":8080", "pod -> pod, other node"},
		{"demo/client-2", a + ":8080", "pod -> pod, other node (back)"},
		{"demo/client-1", w.service.Spec.ClusterIP + ":80", "pod -> Service"},
		{"demo/client-2", w.service.Spec.ClusterIP + ":80", "pod -> Service, other node"},
	} {
		if ok, out := w.connects(ctx, f.from, f.to); !ok {
			t.Errorf("%s (%s -> %s): %s", f.what, f.from, f.to, out)
		}
	}
	if out, err := w.exec(ctx, "demo/client-2", "curl", "-s", "-m", "5", "http://"+w.service.Spec.ClusterIP+"/hostname"); err != nil || !strings.HasPrefix(out, "web-") {
		t.Errorf("pod -> Service: %q (%v), want a web pod's name", out, err)
	}
	n1 := w.c.Nodes[0]
	if out, err := harness.Exec(ctx, n1.Netns, "busybox", "timeout", "5", "busybox", "wget", "-q", "-O", "-", "http://"+b+":8080/hostname"); err != nil || strings.TrimSpace(out) != "web-b" {
		t.Errorf("node %s -> pod web-b: %q (%v)", n1.Name, out, err)
	}
}

// checkPolicy: a NetworkPolicy lets only pods labelled access=yes reach the server; before
// it, both reach it.
func (w *workloads) checkPolicy(ctx context.Context, t *testing.T) {
	t.Helper()
	server := w.pods["secured/server"].Status.PodIP + ":8080"
	for _, from := range []string{"secured/allowed", "secured/denied"} {
		if ok, out := w.connects(ctx, from, server); !ok {
			t.Errorf("before the policy: %s -> server: %s", from, out)
		}
	}
	port := intstr.FromInt32(8080)
	_, err := w.client.NetworkingV1().NetworkPolicies("secured").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "server-access"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"access": "yes"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctx, "the policy denies secured/denied", time.Minute, time.Second, func() (bool, error) {
		ok, _ := w.connects(ctx, "secured/denied", server)
		return !ok, nil
	})
	if ok, out := w.connects(ctx, "secured/allowed", server); !ok {
		t.Errorf("with the policy: allowed -> server: %s", out)
	}
}

// tcpStream is a connection from client-1 to a netcat server on the other node that carries
// a numbered line every 200 ms; the server prints what it receives (its log).
type tcpStream struct {
	w      *workloads
	server string
}

func (w *workloads) startStream(ctx context.Context, t *testing.T) *tcpStream {
	t.Helper()
	n2 := w.c.Nodes[1].Name
	srv := agnhost("demo", "stream-server", n2)
	srv.Spec.Containers[0].Command = []string{"nc", "-l", "9000"}
	if _, err := w.client.CoreV1().Pods("demo").Create(ctx, srv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := waitRunning(ctx, t, w.client, "demo", "stream-server").Status.PodIP
	cl := agnhost("demo", "stream-client", w.c.Nodes[0].Name)
	cl.Spec.Containers[0].Command = []string{"bash", "-c",
		`until exec 3<>/dev/tcp/` + ip + `/9000; do sleep 1; done; i=0; while echo "tick $i" >&3; do i=$((i+1)); sleep 0.2; done; echo broken; sleep infinity`}
	if _, err := w.client.CoreV1().Pods("demo").Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(ctx, t, w.client, "demo", "stream-client")
	s := &tcpStream{w: w, server: "stream-server"}
	poll.Eventually(t, ctx, "ticks at the stream server", time.Minute, time.Second, func() (bool, error) {
		n, err := s.ticks(ctx)
		return n > 0, err
	})
	return s
}

// ticks returns the highest tick the server received, checking that none is missing.
func (s *tcpStream) ticks(ctx context.Context) (int, error) {
	b, err := s.w.client.CoreV1().Pods("demo").GetLogs(s.server, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	last := -1
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(line, "tick "))
		if err != nil || n != last+1 {
			return last, fmt.Errorf("server log: %q after tick %d", line, last)
		}
		last = n
	}
	return last, nil
}

// alive fails unless the connection still carries new lines and neither end restarted.
func (s *tcpStream) alive(ctx context.Context, t *testing.T, when string) {
	t.Helper()
	before, err := s.ticks(ctx)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	poll.Eventually(t, ctx, "new ticks on the connection "+when, time.Minute, time.Second, func() (bool, error) {
		n, err := s.ticks(ctx)
		return n > before+5, err
	})
	for _, name := range []string{"stream-server", "stream-client"} {
		p, err := s.w.client.CoreV1().Pods("demo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].RestartCount != 0 {
			t.Errorf("%s: %s restarted: %+v", when, name, st)
		}
	}
}

func waitRunning(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	poll.Eventually(t, ctx, "pod "+ns+"/"+name+" running", 3*time.Minute, 200*time.Millisecond, func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	})
	return pod
}

// waitRolledOut waits until the Linux DaemonSet and the master Deployment are rolled out:
// every pod of their current generation available.
func (d *deployment) waitRolledOut(ctx context.Context) {
	t := d.t
	apps := d.c.Kube.Client().AppsV1()
	err := poll.Until(ctx, "rollout", time.Second, func() (bool, error) {
		ds, err := apps.DaemonSets(ovntimages.Namespace).Get(ctx, "ovnt-node-linux", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		dep, err := apps.Deployments(ovntimages.Namespace).Get(ctx, "ovnt-master", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return daemonSetDone(ds, len(d.c.Nodes)) && deploymentDone(dep), nil
	})
	if err != nil {
		d.dump(ctx)
		t.Fatal(err)
	}
}

func daemonSetDone(ds *appsv1.DaemonSet, nodes int) bool {
	st := ds.Status
	return st.ObservedGeneration >= ds.Generation && int(st.UpdatedNumberScheduled) == nodes &&
		int(st.NumberAvailable) == nodes && st.NumberUnavailable == 0
}

func deploymentDone(d *appsv1.Deployment) bool {
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == *d.Spec.Replicas &&
		st.AvailableReplicas == *d.Spec.Replicas && st.Replicas == *d.Spec.Replicas
}

// dump logs what an operator would look at: our pods, their containers' states and logs'
// tails.
func (d *deployment) dump(ctx context.Context) {
	out, _ := kubectl(ctx, d.c, "get", "pods", "-A", "-o", "wide")
	d.t.Logf("pods:\n%s", out)
	pods, err := d.c.Kube.Client().CoreV1().Pods(ovntimages.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			d.t.Logf("%s/%s: ready %v, restarts %d, state %+v, last %+v", p.Name, cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
			lines := int64(15)
			if cs.Name == "ovn-controller" {
				lines = 80
			}
			b, _ := d.c.Kube.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: &lines}).DoRaw(ctx)
			d.t.Logf("%s/%s log:\n%s", p.Name, cs.Name, bytes.TrimSpace(b))
		}
	}
	out, _ = kubectl(ctx, d.c, "get", "events", "-n", ovntimages.Namespace)
	d.t.Logf("events:\n%s", out)
	out, _ = d.c.Central.NBCtl(ctx, "show")
	d.t.Logf("ovn-nbctl show:\n%s", out)
	out, _ = d.c.Central.SBCtl(ctx, "show")
	d.t.Logf("ovn-sbctl show:\n%s", out)
	out, _ = d.c.Central.SBCtl(ctx, "--columns=logical_port,chassis,up", "list", "Port_Binding")
	d.t.Logf("ovn-sbctl list Port_Binding:\n%s", out)
	for _, n := range d.c.Nodes {
		out, _ = n.VSCtl(ctx, "get", "Open_vSwitch", ".", "external_ids")
		d.t.Logf("%s: Open_vSwitch external_ids: %s", n.Name, out)
	}
}
