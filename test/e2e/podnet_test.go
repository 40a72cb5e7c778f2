//go:build linux

package e2e

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// TestPodToPod: same node, across nodes (GENEVE on the underlay), and the server sees the
// client pod's own address (no NAT between pods).
func TestPodToPod(t *testing.T) {
	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", "node1"))
	b := startPod(t, podSpec(ns, "b", "node1"))
	c := startPod(t, podSpec(ns, "c", "node2"))
	from := podNetns(t, a)
	aIP := netip.MustParseAddr(a.Status.PodIP)
	t.Run("same node", func(t *testing.T) { expectAnswer(t, from, b.Status.PodIP, ns+"/b", aIP) })
	t.Run("across nodes", func(t *testing.T) { expectAnswer(t, from, c.Status.PodIP, ns+"/c", aIP) })
	t.Run("back", func(t *testing.T) {
		expectAnswer(t, podNetns(t, c), a.Status.PodIP, ns+"/a", netip.MustParseAddr(c.Status.PodIP))
	})
}

// TestNodeAndPod: a node reaches pods on itself and on other nodes through its management
// port, and a pod reaches a service listening on its node (a hostNetwork pod) at the node's
// management address.
func TestNodeAndPod(t *testing.T) {
	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", "node1"))
	c := startPod(t, podSpec(ns, "c", "node2"))
	t.Run("node to local pod", func(t *testing.T) { expectAnswer(t, cl.Node("node1").Netns, a.Status.PodIP, ns+"/a", netip.Addr{}) })
	t.Run("node to remote pod", func(t *testing.T) { expectAnswer(t, cl.Node("node1").Netns, c.Status.PodIP, ns+"/c", netip.Addr{}) })

	host := podSpec(ns, "host", "node1")
	host.Spec.HostNetwork = true
	host.Spec.Containers[0].Ports = []corev1.ContainerPort{
		{ContainerPort: 18080, Protocol: corev1.ProtocolTCP},
		{ContainerPort: 19090, Protocol: corev1.ProtocolUDP},
	}
	_ = startPod(t, host)
	mgmt := mgmtIP(t, "node1")
	t.Run("pod to its node", func(t *testing.T) {
		expectAnswerPorts(t, podNetns(t, a), mgmt.String(), 18080, 19090, ns+"/host", netip.MustParseAddr(a.Status.PodIP))
	})
}

// mgmtIP is the node's address on its pod subnet (the management port): the subnet's .2.
func mgmtIP(t *testing.T, node string) netip.Addr {
	t.Helper()
	n, err := client().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subnet, err := contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
	if err != nil {
		t.Fatal(err)
	}
	return subnet.Addr().Next().Next()
}
