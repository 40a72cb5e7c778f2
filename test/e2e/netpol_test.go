//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// denyAllIngress isolates every pod of ns for ingress.
func denyAllIngress(t *testing.T, ns string) {
	t.Helper()
	_, err := client().NetworkingV1().NetworkPolicies(ns).Create(t.Context(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPolicyNodeHosts (security audit H3): a deny-all pod answers its own node (kubelet
// probes), and neither another node's host nor a host on the underlay that forges the
// node's management address and routes through the node.
func TestPolicyNodeHosts(t *testing.T) {
	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", "node1"))
	b := startPod(t, podSpec(ns, "b", "node1"))
	denyAllIngress(t, ns)
	podA := netip.AddrPortFrom(netip.MustParseAddr(a.Status.PodIP), udpPort)
	// The policy is in force once pod b no longer reaches a.
	waitNoAnswer(t, podNetns(t, b), "udp", podA)

	mgmt1 := mgmtIP(t, "node1")
	t.Run("own node", func(t *testing.T) {
		expectAnswer(t, cl.Node("node1").Netns, a.Status.PodIP, ns+"/a", mgmt1)
	})
	t.Run("other node", func(t *testing.T) {
		expectNoAnswer(t, cl.Node("node2").Netns, "tcp", netip.AddrPortFrom(podA.Addr(), tcpPort))
		expectNoAnswer(t, cl.Node("node2").Netns, "udp", podA)
	})
	t.Run("underlay host forging management addresses", func(t *testing.T) {
		ctx := context.Background()
		ext := cl.External
		mgmt2 := mgmtIP(t, "node2")
		// The forger takes node1's and node2's management addresses and routes the pod via
		// node1, which forwards into the pod network through its management port.
		for _, ip := range []netip.Addr{mgmt1, mgmt2} {
			if _, err := ext.Exec(ctx, "ip", "addr", "add", ip.String()+"/32", "dev", "lo"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ext.Exec(context.Background(), "ip", "addr", "del", ip.String()+"/32", "dev", "lo") })
		}
		externalRoute(t, podA.Addr().String(), cl.Node("node1").IP)

		// What reaches the pod, seen from inside it: a raw socket gets a copy of every UDP
		// datagram delivered there. node1's own datagram is the control: once it is seen, the
		// forged ones sent before it had their chance.
		seen := sniffUDP(t, podNetns(t, a))
		send := func(netns string, src netip.Addr, payload string) {
			err := harness.InNetns(netns, func() error {
				var laddr *net.UDPAddr
				if src.IsValid() {
					laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
				}
				c, err := net.DialUDP("udp4", laddr, net.UDPAddrFromAddrPort(podA))
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte(payload))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := poll.Until(pctx, "node1's own datagram seen in the pod", 500*time.Millisecond, func() (bool, error) {
			send(ext.Netns, mgmt1, "forged-own-node")
			send(ext.Netns, mgmt2, "forged-other-node")
			send(cl.Node("node1").Netns, netip.Addr{}, "control")
			return seen("control"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"forged-own-node", "forged-other-node"} {
			if seen(p) {
				t.Errorf("pod %s received the datagram %q the external host sent through node1 from a forged management address", podA, p)
			}
		}
	})
}

// sniffUDP records the payloads of the UDP datagrams delivered in netns until the test ends;
// seen reports whether one with the given payload came.
func sniffUDP(t *testing.T, netns string) (seen func(payload string) bool) {
	t.Helper()
	var c net.PacketConn
	err := harness.InNetns(netns, func() error {
		var err error
		c, err = net.ListenPacket("ip4:udp", "0.0.0.0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if n > 8 { // the UDP header, then the payload
				mu.Lock()
				got[string(buf[8:n])] = true
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return func(p string) bool {
		mu.Lock()
		defer mu.Unlock()
		return got[p]
	}
}

// waitNoAnswer waits until a probe of proto from netns to addr goes unanswered.
func waitNoAnswer(t *testing.T, netns, proto string, addr netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := poll.Until(ctx, "no answer from "+addr.String(), 200*time.Millisecond, func() (bool, error) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := probeOnce(c, netns, proto, addr)
		return err != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestControlPlaneFromPods (security audit C1): a pod cannot open a connection to OVN
// central's ports (the master's --control-plane-addresses, here the external host's address)
// unless a NetworkPolicy allows it; the same host's other ports stay reachable.
func TestControlPlaneFromPods(t *testing.T) {
	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", "node1"))
	from := podNetns(t, a)
	central := netip.MustParseAddr(cl.External.IP)
	for _, port := range []uint16{6641, 6642, 6643, 6644, 6650} {
		serveTCP(t, cl.External.Netns, netip.AddrPortFrom(central, port))
	}
	// The control: the same host, a port that is not OVN's, answers (after any warm-up).
	waitAnswer(t, from, "tcp", netip.AddrPortFrom(central, 6650))
	for _, port := range []uint16{6641, 6642, 6643, 6644} {
		expectNoAnswer(t, from, "tcp", netip.AddrPortFrom(central, port))
	}

	// An egress policy that allows the Southbound port opens that one only.
	sb := intstr.FromInt32(6642)
	_, err := client().NetworkingV1().NetworkPolicies(ns).Create(t.Context(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "sb-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: central.String() + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &sb}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, from, "tcp", netip.AddrPortFrom(central, 6642))
	expectNoAnswer(t, from, "tcp", netip.AddrPortFrom(central, 6641))
}

// serveTCP answers every TCP connection to addr in netns with one line, until the test ends.
func serveTCP(t *testing.T, netns string, addr netip.AddrPort) {
	t.Helper()
	var l net.Listener
	err := harness.InNetns(netns, func() error {
		var err error
		l, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "central %s\n", c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr())
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
}

// extraNamespace creates namespace name for one test and deletes it when the test ends.
func extraNamespace(t *testing.T, name string) string {
	t.Helper()
	_, err := client().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// TestNodePortKeepsPodPolicy (security audit H2): the sandbox's sample policy (pods of one
// namespace, and clients outside the pod network) holds against a pod of another namespace
// that goes through a NodePort of any node, with externalTrafficPolicy Cluster (the gateway
// router SNATs to its join address) or Local (the pod arrives from its node's address); a
// client outside the cluster still gets in where the backend sees it (Local).
func TestNodePortKeepsPodPolicy(t *testing.T) {
	ns := testNamespace(t)
	clientNS := extraNamespace(t, ns+"-client")
	strangerNS := extraNamespace(t, ns+"-stranger")
	tcpPort := corev1.ContainerPort{Name: "tcp", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}
	web := startPod(t, workloadPod(ns, "web", "node1", "web", tcpPort))
	friend := startPod(t, podSpec(clientNS, "friend", "node2"))
	stranger := startPod(t, podSpec(strangerNS, "stranger", "node2"))
	port := intstr.FromInt32(8080)
	_, err := client().NetworkingV1().NetworkPolicies(ns).Create(t.Context(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": clientNS}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{cl.ClusterCIDR()}}},
				}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterSvc := newService(ns, "web", "web", svcPort("tcp", corev1.ProtocolTCP, 80, 8080))
	clusterSvc.Spec.Type = corev1.ServiceTypeNodePort
	localSvc := newService(ns, "web-local", "web", svcPort("tcp", corev1.ProtocolTCP, 80, 8080))
	localSvc.Spec.Type = corev1.ServiceTypeNodePort
	localSvc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	npCluster := nodePort(t, createService(t, clusterSvc), "tcp")
	npLocal := nodePort(t, createService(t, localSvc), "tcp")

	webAddr := netip.AddrPortFrom(netip.MustParseAddr(web.Status.PodIP), 8080)
	// The controls: the policy admits the friend's namespace and refuses the stranger's.
	waitAnswer(t, podNetns(t, friend), "tcp", webAddr, ns+"/web")
	waitNoAnswer(t, podNetns(t, stranger), "tcp", webAddr)
	// The outside: the external host through node1 (the backend's node), Local.
	waitAnswer(t, cl.External.Netns, "tcp", addrPort(cl.Node("node1").IP, npLocal), ns+"/web")

	for _, node := range []string{"node1", "node2"} {
		for name, np := range map[string]int32{"Cluster": npCluster, "Local": npLocal} {
			if name == "Local" && node == "node2" {
				continue // node2 has no endpoint of the Local Service
			}
			t.Run(fmt.Sprintf("stranger via %s NodePort (%s)", node, name), func(t *testing.T) {
				expectNoAnswer(t, podNetns(t, stranger), "tcp", addrPort(cl.Node(node).IP, np))
			})
		}
	}
}
