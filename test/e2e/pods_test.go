//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

const (
	tcpPort = 8080
	udpPort = 9090
)

func client() kubernetes.Interface { return cl.Kube.Client() }

// testNamespace creates a namespace for one test and deletes it when the test ends.
func testNamespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	ctx := context.Background()
	_, err := client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// podSpec is a pod pinned to a node whose workload answers on tcpPort and udpPort.
func podSpec(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:  "workload",
				Image: "ovnt-workload",
				Ports: []corev1.ContainerPort{
					{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP},
					{Name: "udp", ContainerPort: udpPort, Protocol: corev1.ProtocolUDP},
				},
			}},
		},
	}
}

// startPod creates the pod and waits until it is Ready; it returns the pod as it is then.
func startPod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := client().CoreV1().Pods(pod.Namespace).Create(ctx, cluster.Workload(pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitPodReady(t, ctx, pod.Namespace, pod.Name)
}

func waitPodReady(t testing.TB, ctx context.Context, ns, name string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := poll.Until(ctx, "pod "+ns+"/"+name+" Ready", 50*time.Millisecond, func() (bool, error) {
		p, err := client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s, podIP %q", p.Status.Phase, p.Status.PodIP)
	})
	if err != nil {
		events, _ := client().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		for _, e := range events.Items {
			t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
		t.Fatal(err)
	}
	return got
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll.Until(ctx, "pod "+ns+"/"+name+" gone", 50*time.Millisecond, func() (bool, error) {
		_, err := client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// podNetns is the path of the pod's network namespace.
func podNetns(t testing.TB, pod *corev1.Pod) string {
	t.Helper()
	n := cl.Node(pod.Spec.NodeName)
	if n == nil {
		t.Fatalf("pod %s/%s is on unknown node %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	path, err := n.PodNetnsPath(t.Context(), pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// tcpFrom opens a TCP connection from inside netns to addr and returns the answer line.
func tcpFrom(ctx context.Context, netns, addr string) (string, error) {
	var line string
	err := harness.InNetns(netns, func() error {
		var err error
		line, err = probe.TCP(ctx, addr)
		return err
	})
	return line, err
}

// udpFrom sends a UDP datagram from inside netns to addr and returns the answer line.
func udpFrom(ctx context.Context, netns, addr string) (string, error) {
	var line string
	err := harness.InNetns(netns, func() error {
		var err error
		line, err = probe.UDP(ctx, addr)
		return err
	})
	return line, err
}

// expectAnswer checks that a TCP and a UDP probe from netns to the pod at ip are answered by
// wantName, which saw the client address wantClient (when valid).
func expectAnswer(t *testing.T, from, ip, wantName string, wantClient netip.Addr) {
	t.Helper()
	expectAnswerPorts(t, from, ip, tcpPort, udpPort, wantName, wantClient)
}

// expectAnswerPorts is expectAnswer on other ports.
func expectAnswerPorts(t *testing.T, from, ip string, tcp, udp int, wantName string, wantClient netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for proto, probeFn := range map[string]func(context.Context, string, string) (string, error){"tcp": tcpFrom, "udp": udpFrom} {
		port := tcp
		if proto == "udp" {
			port = udp
		}
		addr := netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port)).String()
		var line string
		err := poll.Until(ctx, proto+" "+addr+" from "+from, 200*time.Millisecond, func() (bool, error) {
			var err error
			c, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			line, err = probeFn(c, from, addr)
			return err == nil, err
		})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		name, client, err := probe.ParseLine(line)
		if err != nil {
			t.Errorf("%s %s: %v", proto, addr, err)
			continue
		}
		if name != wantName {
			t.Errorf("%s %s answered by %s, want %s", proto, addr, name, wantName)
		}
		if wantClient.IsValid() && client != wantClient {
			t.Errorf("%s %s: server saw client %s, want %s", proto, addr, client, wantClient)
		}
	}
}
