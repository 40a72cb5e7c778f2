package svcmodel

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func policyNode(name, chassisIP string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if chassisIP != "" {
		v, err := contract.NodeChassisInfo{ChassisID: name, NodeIP: chassisIP, GatewayMAC: "0a:00:00:00:00:01"}.Marshal()
		if err != nil {
			panic(err)
		}
		n.Annotations = map[string]string{contract.NodeChassisKey: v}
	}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

// H1: a namespace user's externalIPs and ingress IPs are admitted only inside the operator's
// allowed ranges, and never a node's address or one of the cluster's own ranges.
func TestExternalIPPolicy(t *testing.T) {
	nodes := []*corev1.Node{
		policyNode("node1", "172.18.0.1/24", "172.18.0.1"),
		policyNode("node2", "", "172.18.0.2"),            // the kubelet's address only
		policyNode("node3", "172.18.0.3/24"),             // the agent's annotation only
		policyNode("node4", "172.18.0.99/24", "fd00::4"), // an IPv6 address is no IPv4 VIP anyway
	}
	reserved := prefixes("10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16")
	open := NewExternalIPPolicy(prefixes("172.18.0.0/16", "192.0.2.0/24", "10.0.0.0/8"), reserved, nodes)
	closed := NewExternalIPPolicy(nil, reserved, nodes)
	if want := []string{"172.18.0.1", "172.18.0.2", "172.18.0.3", "172.18.0.99"}; !slices.Equal(addrStrings(open.NodeIPs), want) {
		t.Errorf("node IPs %v, want %v", open.NodeIPs, want)
	}
	for _, tc := range []struct {
		ip     string
		policy ExternalIPPolicy
		why    string // "" admitted
	}{
		{"192.0.2.11", open, ""},
		{"172.18.5.5", open, ""},
		{"10.1.2.3", open, ""},
		{"192.0.2.11", closed, "no external IP ranges are allowed"},
		{"198.51.100.1", open, "outside the allowed ranges"},
		{"172.18.0.1", open, "node's address"},
		{"172.18.0.2", open, "node's address"},
		{"172.18.0.3", open, "node's address"},
		{"10.244.0.2", open, "cluster's own range 10.244.0.0/16"}, // a management port
		{"10.96.0.10", open, "cluster's own range 10.96.0.0/16"},
		{"100.64.0.2", open, "cluster's own range 100.64.0.0/16"},
		{"127.0.0.1", open, "not a unicast host address"},
		{"169.254.100.1", open, "not a unicast host address"},
		{"224.0.0.1", open, "not a unicast host address"},
		{"255.255.255.255", open, "not a unicast host address"},
		{"0.0.0.0", open, "not a unicast host address"},
	} {
		got := tc.policy.refusal(netip.MustParseAddr(tc.ip))
		if (tc.why == "") != (got == "") || !strings.Contains(got, tc.why) {
			t.Errorf("%s: refusal %q, want %q", tc.ip, got, tc.why)
		}
	}

	// The rest of the Service stays: the admitted addresses, a Problem per refused one.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalIPs: []string{"172.18.0.1", "192.0.2.11"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.12"}, {IP: "10.96.0.1"}}}}}
	ips, problems := ExternalIPs(svc, open)
	if want := []string{"192.0.2.11", "192.0.2.12"}; !slices.Equal(addrStrings(ips), want) {
		t.Errorf("admitted %v, want %v", ips, want)
	}
	if len(problems) != 2 || problems[0].Reason != ReasonExternalIPRefused || !strings.Contains(problems[0].Message, "externalIP 172.18.0.1") ||
		!strings.Contains(problems[1].Message, "load balancer ingress IP 10.96.0.1") {
		t.Errorf("problems %+v", problems)
	}
	if ips, _ := ExternalIPs(svc, closed); len(ips) != 0 {
		t.Errorf("nothing allowed, yet %v admitted", ips)
	}
}

func addrStrings(ips []netip.Addr) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// AllowAll admits every unicast IPv4 address outside 10.244.0.0/16 (the tests' pod range),
// for tests about everything but the policy.
var AllowAll = ExternalIPPolicy{Allowed: prefixes("0.0.0.0/0"), Reserved: prefixes("10.244.0.0/16")}
