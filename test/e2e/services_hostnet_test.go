//go:build linux

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// hostNetPod is a host-network workload on node answering on TCP tcpPort and UDP udpPort
// (ports no other test's host-network pod uses: they share the node's namespace).
func hostNetPod(ns, name, node, app string, tcpPort, udpPort int32) *corev1.Pod {
	p := workloadPod(ns, name, node, app,
		corev1.ContainerPort{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "udp", ContainerPort: udpPort, Protocol: corev1.ProtocolUDP})
	p.Spec.HostNetwork = true
	return p
}

// TestServiceHostNetworkEndpoints: a Service whose endpoints are host-network pods on node1
// and node2 (their endpoints are the node addresses) answers from every client: the nodes
// and pods through the ClusterIP, pods, nodes and the external host through every node's
// NodePort. Upstream "Networking Granular Checks: Services should function for service
// endpoints using hostNetwork" and "Services should respect internalTrafficPolicy=Local Pod
// and Node, to Pod (hostNetwork: true)" found two holes: a node balanced to its own address
// got the packet back from itself (the node switch now writes it as the management
// address: a hairpin), and a gateway router balanced a NodePort to its own node's address,
// which it owns and cannot forward to (now the management address too).
func TestServiceHostNetworkEndpoints(t *testing.T) {
	ns := testNamespace(t)
	const tcpPort, udpPort = 18281, 19291
	startPod(t, hostNetPod(ns, "h1", "node1", "hostweb", tcpPort, udpPort))
	startPod(t, hostNetPod(ns, "h2", "node2", "hostweb", tcpPort, udpPort))
	client1 := startPod(t, workloadPod(ns, "client1", "node1", "client"))
	client2 := startPod(t, workloadPod(ns, "client2", "node2", "client"))
	s := newService(ns, "hostweb", "hostweb", svcPort("http", corev1.ProtocolTCP, 80, tcpPort), svcPort("dns", corev1.ProtocolUDP, 53, udpPort))
	s.Spec.Type = corev1.ServiceTypeNodePort
	svc := createService(t, s)
	vip := svc.Spec.ClusterIP
	httpNP, dnsNP := nodePort(t, svc, "http"), nodePort(t, svc, "dns")
	backends := []string{ns + "/h1", ns + "/h2"}
	froms := map[string]string{
		"node1": cl.Node("node1").Netns, "node2": cl.Node("node2").Netns,
		"pod on node1": podNetns(t, client1), "pod on node2": podNetns(t, client2),
	}
	for what, from := range froms {
		t.Run(what+" to the ClusterIP", func(t *testing.T) {
			expectSpread(t, from, tcp, addrPort(vip, 80), backends...)
			expectSpread(t, from, udp, addrPort(vip, 53), backends...)
		})
	}
	froms["external host"] = cl.External.Netns
	for _, node := range []string{"node1", "node2"} {
		ip := cl.Node(node).IP
		for what, from := range froms {
			t.Run(what+" to "+node+"'s NodePort", func(t *testing.T) {
				expectSpread(t, from, tcp, addrPort(ip, httpNP), backends...)
				expectSpread(t, from, udp, addrPort(ip, dnsNP), backends...)
			})
		}
	}
	t.Run("internalTrafficPolicy Local", func(t *testing.T) {
		updateService(t, ns, "hostweb", func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		})
		for _, c := range []struct{ from, want string }{
			{cl.Node("node1").Netns, ns + "/h1"}, {podNetns(t, client1), ns + "/h1"},
			{cl.Node("node2").Netns, ns + "/h2"}, {podNetns(t, client2), ns + "/h2"},
		} {
			waitAnswer(t, c.from, tcp, addrPort(vip, 80), c.want)
			if seen := collect(t, c.from, tcp, addrPort(vip, 80), 6); seen[c.want] != 6 {
				t.Errorf("from %s: answers %v, want only %s", c.from, seen, c.want)
			}
		}
	})
}
