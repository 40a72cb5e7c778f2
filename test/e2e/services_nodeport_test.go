//go:build linux

package e2e

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// NodePorts through the gateway bridge: from the external host, and from pods and nodes to
// another node's IP. These wait on the master giving the gateway routers the VIP
// 169.254.100.1:<nodePort> that the bridge rewrites the node IP to (node/internal/gateway
// README: OVN 23.03 template VIPs equal to the GR's SNAT address miss force_snat).

// TestServiceNodePortFromOutside: every node's IP answers from the external host, from the
// other node's pods and from the other node.
func TestServiceNodePortFromOutside(t *testing.T) {
	ns := testNamespace(t)
	_, _, client1, client2 := twoBackends(t, ns)
	s := newService(ns, "np", "web", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 9090))
	s.Spec.Type = corev1.ServiceTypeNodePort
	svc := createService(t, s)
	backends := []string{ns + "/a", ns + "/c"}
	httpNP, dnsNP := nodePort(t, svc, "http"), nodePort(t, svc, "dns")
	other := map[string]struct {
		node string
		pod  *corev1.Pod
	}{"node1": {"node2", client2}, "node2": {"node1", client1}}
	for _, node := range []string{"node1", "node2"} {
		ip := cl.Node(node).IP
		t.Run("external host to "+node, func(t *testing.T) {
			expectSpread(t, cl.External.Netns, tcp, addrPort(ip, httpNP), backends...)
			expectSpread(t, cl.External.Netns, udp, addrPort(ip, dnsNP), backends...)
		})
		o := other[node]
		t.Run(o.pod.Name+" to "+node, func(t *testing.T) {
			expectSpread(t, podNetns(t, o.pod), tcp, addrPort(ip, httpNP), backends...)
			expectSpread(t, podNetns(t, o.pod), udp, addrPort(ip, dnsNP), backends...)
		})
		t.Run(o.node+" to "+node, func(t *testing.T) {
			expectSpread(t, cl.Node(o.node).Netns, tcp, addrPort(ip, httpNP), backends...)
			expectSpread(t, cl.Node(o.node).Netns, udp, addrPort(ip, dnsNP), backends...)
		})
	}
}

// TestServiceExternalTrafficPolicyLocal: only node1 has an endpoint. From the external host,
// node1 answers with the client IP kept, node2 does not forward until it has an endpoint of
// its own; a host reaching its own NodePort keeps its address; a pod of node1 reaches
// node1's NodePort.
func TestServiceExternalTrafficPolicyLocal(t *testing.T) {
	ns := testNamespace(t)
	svc := etpLocalService(t, ns)
	np := nodePort(t, svc, "http")
	ext := netip.MustParseAddr(cl.External.IP)
	t.Run("node with the endpoint keeps the client IP", func(t *testing.T) {
		got := waitAnswer(t, cl.External.Netns, tcp, addrPort(cl.Node("node1").IP, np), ns+"/a")
		if got.client != ext {
			t.Errorf("the backend saw %s, want the external host's %s", got.client, ext)
		}
	})
	t.Run("node without endpoints does not forward", func(t *testing.T) {
		expectNoAnswer(t, cl.External.Netns, tcp, addrPort(cl.Node("node2").IP, np))
	})
	// A host's own connection to its node's NodePort is answered by any endpoint and keeps
	// the node IP as its source (kube-proxy's short circuit; upstream "NodePort and
	// HealthCheckNodePort ... when ExternalTrafficPolicy changes"): the backend on node1
	// answers node2's IP, at a port the cluster router sends back through node2's
	// management port, where node2's switch undoes the DNAT.
	for _, node := range []string{"node2", "node1"} {
		t.Run(node+"'s host to its own NodePort keeps its address", func(t *testing.T) {
			ip := cl.Node(node).IP
			for range 3 { // new connections each time, each from a new source port
				got := waitAnswer(t, cl.Node(node).Netns, tcp, addrPort(ip, np), ns+"/a")
				if got.client.String() != ip {
					t.Fatalf("the backend saw %s, want %s's address %s", got.client, node, ip)
				}
			}
		})
	}
	// A pod reaching its own node's NodePort: the cluster router's policy for the node IP
	// (pods reach their host through the management port) must not take it past the VIP
	// to the host, which has no NodePort for it (the node switch balances it).
	t.Run("a pod of node1 to node1", func(t *testing.T) {
		client := startPod(t, workloadPod(ns, "client1", "node1", "client"))
		waitAnswer(t, podNetns(t, client), tcp, addrPort(cl.Node("node1").IP, np), ns+"/a")
	})
	t.Run("node2 with an endpoint of its own", func(t *testing.T) {
		startPod(t, workloadPod(ns, "c", "node2", "local", corev1.ContainerPort{Name: "tcp", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}))
		got := waitAnswer(t, cl.External.Netns, tcp, addrPort(cl.Node("node2").IP, np), ns+"/c")
		if got.client != ext {
			t.Errorf("the backend on node2 saw %s, want %s", got.client, ext)
		}
		if seen := collect(t, cl.External.Netns, tcp, addrPort(cl.Node("node2").IP, np), 10); seen[ns+"/c"] != 10 {
			t.Errorf("node2 sent connections to %v, want only its own %s/c", seen, ns)
		}
	})
}

// TestServiceNodePortNoEndpoints: a NodePort without endpoints resets from the external host.
func TestServiceNodePortNoEndpoints(t *testing.T) {
	ns := testNamespace(t)
	s := newService(ns, "empty", "nothing", svcPort("http", corev1.ProtocolTCP, 80, 8080))
	s.Spec.Type = corev1.ServiceTypeNodePort
	svc := createService(t, s)
	expectRefused(t, cl.External.Netns, addrPort(cl.Node("node1").IP, nodePort(t, svc, "http")))
}
