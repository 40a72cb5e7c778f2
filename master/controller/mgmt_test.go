//go:build linux

package controller

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// H3 (security audit): the management-port allowance of an ingress-isolated pod admits its
// own node's management port (kubelet probes) and no other node's, and the management port
// carries only its own addresses: a node cannot forward a packet with another source into
// the pod network.
func TestManagementAllowanceOwnNodeOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	e.createNode("node1", nil)
	e.createNode("node2", nil)
	sub1, sub2 := e.nodeSubnet("node1"), e.nodeSubnet("node2")
	e.createNamespace("h3", nil)
	srv := e.createLabelledPod("h3", "srv", "node1", map[string]string{"app": "srv"})
	cli := e.createLabelledPod("h3", "cli", "node1", map[string]string{"app": "cli"})
	stranger := e.createLabelledPod("h3", "stranger", "node1", map[string]string{"app": "stranger"})
	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "h3", Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}},
	})
	// srv admits cli: a packet that forges cli's address would pass the ACLs.
	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "h3", Name: "srv-from-cli"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "srv"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "cli")}}}}},
	})
	e.expect("deny-all", stranger, srv, "tcp", 8080, false)
	e.expect("srv admits cli", cli, srv, "tcp", 8080, true)

	// fromMgmt traces TCP from node's management port to srv; via is the switch the packet
	// enters (the node's own) and the destination MAC its first hop's.
	fromMgmt := func(node string, subnet netip.Prefix, src netip.Addr) (bool, string) {
		mgmt := contract.ManagementIP(subnet)
		dstMAC := srv.mac
		if node != "node1" {
			dstMAC = contract.MACFromIP(contract.RouterIP(subnet)).String()
		}
		flow := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == 8080`,
			contract.ManagementPort(node), contract.MACFromIP(mgmt), dstMAC, src, srv.ip)
		out := e.traceCT("new", nil, node, flow)
		return strings.Contains(out, `output("h3_srv")`), out
	}
	own := contract.ManagementIP(sub1)
	other := contract.ManagementIP(sub2)
	if ok, out := fromMgmt("node1", sub1, own); !ok {
		t.Errorf("node1's own management port (kubelet probes) -> deny-all pod on node1 is dropped:\n%s", out)
	}
	if ok, out := fromMgmt("node2", sub2, other); ok {
		t.Errorf("node2's management port -> deny-all pod on node1 is delivered:\n%s", out)
	}
	// A node forwarding a packet into the pod network with another source: port security.
	if ok, out := fromMgmt("node1", sub1, cli.ip); ok {
		t.Errorf("node1's management port sent a packet with pod cli's address %s; it was delivered:\n%s", cli.ip, out)
	}
	if ok, out := fromMgmt("node1", sub1, other); ok {
		t.Errorf("node1's management port sent a packet with node2's management address %s; it was delivered:\n%s", other, out)
	}
}

// A host's own connection to an externalTrafficPolicy=Local NodePort keeps its node IP as the
// source, from a short-circuit port (node/localnat), and is load-balanced on its node
// switch. The backend's answer, from a pod on another node, must go back through that
// host's management port, where the switch undoes the DNAT; a pod's packet for another port
// of that node IP still leaves through its own gateway router. UDP alike.
func TestShortCircuitAnswerThroughManagementPort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	_, pb := e.twoNodePods()
	node1IP := netip.MustParsePrefix(chassisOf(1).NodeIP).Addr()
	trace := func(l4 string) string {
		return e.trace("node2", fmt.Sprintf(`inport == "default_b" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && %s`,
			pb.MAC, contract.MACFromIP(pb.Gateways[0]), pb.IPs[0].Addr(), node1IP, l4))
	}
	mgmt1 := fmt.Sprintf("output(%q)", contract.ManagementPort("node1"))
	for _, l4 := range []string{
		fmt.Sprintf("tcp && tcp.src == 8080 && tcp.dst == %d", contract.ShortCircuitPortMin),
		"tcp && tcp.src == 8080 && tcp.dst == 65535",
		fmt.Sprintf("udp && udp.src == 53 && udp.dst == %d", contract.ShortCircuitPortMin+7),
	} {
		if out := trace(l4); !strings.Contains(out, mgmt1) {
			t.Errorf("pod b on node2 -> node1's address, %s: not through node1's management port:\n%s", l4, out)
		}
	}
	for _, l4 := range []string{
		fmt.Sprintf("tcp && tcp.src == 40000 && tcp.dst == %d", contract.ShortCircuitPortMin-1),
		"udp && udp.src == 40000 && udp.dst == 53",
	} {
		if out := trace(l4); strings.Contains(out, mgmt1) || !strings.Contains(out, fmt.Sprintf("output(%q)", contract.LocalnetPort("node2"))) {
			t.Errorf("pod b on node2 -> node1's address, %s: not through node2's gateway router:\n%s", l4, out)
		}
	}
}
