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
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
)

// leaves traces TCP from pod p to dst:port and reports whether it leaves the cluster: node1's
// gateway router sends it (an ARP for the address first) out of its localnet port.
func (e *env) leaves(p testPod, dst netip.Addr, port int) (bool, string) {
	flow := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == %d`,
		contract.PodPort(p.ns, p.name), p.mac, p.gwMAC, p.ip, dst, port)
	out := e.traceCT("new", nil, "node1", flow)
	return strings.Contains(out, `output("breth0_node1")`), out
}

// C1 (security audit), the network half: pods do not reach the OVN central's ports
// (--control-plane-addresses) unless a NetworkPolicy lets them; other ports and addresses
// stay open.
func TestControlPlaneDeniedToPods(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	central := netip.MustParseAddr("172.18.0.200")
	cfg.ControlPlane = netpol.ControlPlane{Addresses: []netip.Prefix{netip.PrefixFrom(central, 32)}}
	e.startMaster(cfg)
	e.createNode("node1", chassisOf(1))
	e.createNamespace("cp", nil)
	pod := e.createLabelledPod("cp", "a", "node1", map[string]string{"app": "a"})
	other := netip.MustParseAddr("172.18.0.201")

	expect := func(what string, dst netip.Addr, port int, want bool) {
		t.Helper()
		e.eventually(fmt.Sprintf("%s: %s:%d leaves=%v", what, dst, port, want), func() (bool, string) {
			got, out := e.leaves(pod, dst, port)
			return got == want, out
		})
	}
	for _, port := range []int{6641, 6642, 6643, 6644} {
		expect("central's port", central, port, false)
	}
	expect("central, another port", central, 443, true)
	expect("another address, an OVN port", other, 6641, true)
	// The node's management address, where a Service's load balancer sends the node's own
	// host-network endpoints and which the node delivers to its node IP: a central on the
	// node would be reached through it.
	mgmt := contract.ManagementIP(e.nodeSubnet("node1"))
	for _, c := range []struct {
		port int
		want bool
	}{{6641, false}, {443, true}} {
		flow := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == %d`,
			contract.PodPort(pod.ns, pod.name), pod.mac, contract.MACFromIP(mgmt), pod.ip, mgmt, c.port)
		e.eventually(fmt.Sprintf("management address :%d reached=%v", c.port, c.want), func() (bool, string) {
			out := e.traceCT("new", nil, "node1", flow)
			return strings.Contains(out, `output("k8s-node1")`) == c.want, out
		})
	}

	// A NetworkPolicy that allows it wins.
	tcp := intstr.FromInt32(6642)
	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: "sb-client"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "a"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: central.String() + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &tcp}}}}},
	})
	expect("allowed by policy", central, 6642, true)
	expect("not allowed by the policy", central, 6641, false)

	// What an operator sees: one ACL, owned by the cluster, on the node switches.
	acls := e.nbctl("--bare", "--columns=match,action,external_ids", "find", "acl", "external_ids:k8s.ovn-transparent.io/role=control-plane-deny")
	if !strings.Contains(acls, central.String()) || !strings.Contains(acls, "drop") || !strings.Contains(acls, "owner-kind=Cluster") {
		t.Errorf("control-plane ACL rows:\n%s", acls)
	}
	t.Logf("acl-list of a node switch's anchor:\n%s", e.nbctl("acl-list", netpol.NodeSwitchesGroup))
}
