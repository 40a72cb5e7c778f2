package services

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	mastersvc "github.com/ovn-transparent/ovn-transparent/master/services"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// An external load balancer sends a node traffic only while its healthCheckNodePort answers
// 200, and the node's gateway router then balances it to the backends of the master's
// per-node load balancer. Both come from svcmodel; this checks that they agree, for the
// same Service and slices, on every node: the health check counts the router's backends,
// except on a node whose router has fallen back to its terminating endpoints, which keeps
// their traffic but reports none so that external load balancers drain it (upstream "should
// fail health check node port if there are only terminating endpoints").
func TestHealthCheckAgreesWithGatewayRouterLB(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	nodes := []mastersvc.Node{
		{Name: "node1", IP: netip.MustParseAddr("172.18.0.1"), HasSwitch: true},
		{Name: "node2", IP: netip.MustParseAddr("172.18.0.2"), HasSwitch: true},
	}
	withPorts := func(s *discovery.EndpointSlice, ports ...discovery.EndpointPort) *discovery.EndpointSlice {
		s.Ports = ports
		return s
	}
	http := func(n int32) discovery.EndpointPort {
		return discovery.EndpointPort{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(n)}
	}
	dns := discovery.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(5353))}
	for _, tc := range []struct {
		name    string
		publish bool
		slices  []*discovery.EndpointSlice
		// draining is the node whose gateway router balances to terminating endpoints only.
		draining string
	}{
		{"ready here and there", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.5", node: "node1"}, ep{addr: "10.244.1.6", node: "node1", ready: no}, ep{addr: "10.244.2.5", node: "node2"}),
			http(8080), dns)}, ""},
		{"node1 drains while node2 is ready", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.10", node: "node1", ready: no, serving: yes, terminating: yes}, ep{addr: "10.244.2.10", node: "node2"}),
			http(8080), dns)}, "node1"},
		{"none ready: serving and terminating", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.8", node: "node1", ready: no, serving: yes, terminating: yes},
			ep{addr: "10.244.1.9", node: "node1", ready: no, serving: no, terminating: yes}), http(8080), dns)}, "node1"},
		{"publishNotReadyAddresses", true, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.11", node: "node1", ready: no}, ep{addr: "10.244.2.11", node: "node2", ready: no}), http(8080), dns)}, ""},
		{"a named port per slice, one address in two slices", false, []*discovery.EndpointSlice{
			withPorts(slice("web", "a", ep{addr: "10.244.1.5", node: "node1"}, ep{addr: "10.244.1.6", node: "node1"}), http(8080)),
			withPorts(slice("web", "b", ep{addr: "10.244.1.6", node: "node1"}, ep{addr: "10.244.2.7", node: "node2"}), http(9090), dns),
		}, ""},
		{"another Service's and another namespace's slices", false, []*discovery.EndpointSlice{
			withPorts(slice("web", "a", ep{addr: "10.244.2.5", node: "node2"}), http(8080)),
			withPorts(slice("other", "b", ep{addr: "10.244.1.5", node: "node1"}), http(8080)),
			func() *discovery.EndpointSlice {
				s := withPorts(slice("web", "c", ep{addr: "10.244.1.6", node: "node1"}), http(8080))
				s.Namespace = "elsewhere"
				return s
			}(),
		}, ""},
	} {
		s := svc("web", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.PublishNotReadyAddresses = tc.publish
		})
		// The master sees the Service's own slices (its index by the service-name label).
		var own []*discovery.EndpointSlice
		for _, sl := range tc.slices {
			if sl.Namespace == s.Namespace && sl.Labels[discovery.LabelServiceName] == s.Name {
				own = append(own, sl)
			}
		}
		rows, _ := mastersvc.Rows(s, own, nodes, allowAll)
		ports, _ := svcmodel.Ports(s)
		for _, n := range nodes {
			want := routerBackends(rows, n.Name)
			if n.Name == tc.draining {
				if len(want) == 0 {
					t.Errorf("%s, %s: the gateway router has no terminating backend to fall back to", tc.name, n.Name)
				}
				want = nil
			}
			if got := localEndpoints(s, ports, own, n.Name); !slices.Equal(got, want) {
				t.Errorf("%s, %s: health check endpoints %v, want %v", tc.name, n.Name, got, want)
			}
			hc, ok := Desired([]*corev1.Service{s}, tc.slices, n.Name, n.IP, pods, allowAll).Health[32000]
			if !ok || hc.LocalEndpoints != len(want) {
				t.Errorf("%s, %s: health check %+v (present %v), want %d endpoints %v", tc.name, n.Name, hc, ok, len(want), want)
			}
		}
	}
}

// routerBackends are the distinct backend addresses of node's gateway router load balancers
// in rows, sorted.
func routerBackends(rows []nb.Row, node string) []netip.Addr {
	var out []netip.Addr
	for _, r := range rows {
		if r.ID.Role != nb.ServiceNodeRouterLB || !strings.HasSuffix(r.ID.Scope, "/"+node) {
			continue
		}
		for _, backends := range r.Model.(*nbdb.LoadBalancer).Vips {
			for _, b := range strings.Split(backends, ",") {
				if b != "" {
					out = append(out, netip.MustParseAddrPort(b).Addr())
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// allowAll admits every unicast IPv4 external address outside the tests' pod range, for tests
// about everything but the external IP policy.
var allowAll = svcmodel.ExternalIPPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
	Reserved: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}

// H1: a tenant's Service claiming a node's address (its sshd, its kubelet) as an externalIP
// or ingress IP gets neither a gateway bridge entry point for it on any node nor a load
// balancer VIP on the master; its other, allowed addresses and its NodePorts still work. The
// master and the node refuse exactly the same addresses, built from the same flags and Nodes.
func TestExternalIPPolicyAgreesWithMaster(t *testing.T) {
	nodeObj := func(name, ip string) *corev1.Node {
		n := &corev1.Node{}
		n.Name = name
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		return n
	}
	nodes := []*corev1.Node{nodeObj("node1", "172.18.0.1"), nodeObj("node2", "172.18.0.2")}
	policy := svcmodel.NewExternalIPPolicy(
		[]netip.Prefix{netip.MustParsePrefix("172.18.0.0/16"), netip.MustParsePrefix("192.0.2.0/24")},
		[]netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")},
		nodes)
	hijack := svc("hijack", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22, NodePort: 30022},
			{Name: "kubelet", Protocol: corev1.ProtocolTCP, Port: 10250, NodePort: 30250},
		}
		s.Spec.ExternalIPs = []string{"172.18.0.1", "192.0.2.10", "10.96.0.1", "198.51.100.1"}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.2"}, {IP: "192.0.2.20"}}
	})
	admitted := []string{"192.0.2.10", "192.0.2.20"}

	st := Desired([]*corev1.Service{hijack}, nil, "node1", nodeIP, pods, policy)
	var entry []string
	nodePorts := 0
	for _, p := range st.NodePorts {
		if p.IP.IsValid() {
			entry = append(entry, p.IP.String())
		} else {
			nodePorts++
		}
	}
	slices.Sort(entry)
	entry = slices.Compact(entry)
	if !slices.Equal(entry, admitted) {
		t.Errorf("gateway bridge entry points on %v, want only %v", entry, admitted)
	}
	if nodePorts != 2 {
		t.Errorf("%d NodePort entry points, want the Service's 2: %+v", nodePorts, st.NodePorts)
	}

	rows, problems := mastersvc.Rows(hijack, nil, nil, policy)
	var vips []string
	for _, r := range rows {
		lb, ok := r.Model.(*nbdb.LoadBalancer)
		if !ok {
			continue
		}
		for vip := range lb.Vips {
			ap, err := netip.ParseAddrPort(vip)
			if err == nil && ap.Addr() != netip.MustParseAddr("10.96.0.10") && ap.Addr() != netip.MustParseAddr("169.254.100.1") && !strings.HasPrefix(vip, "^") {
				vips = append(vips, ap.Addr().String())
			}
		}
	}
	slices.Sort(vips)
	vips = slices.Compact(vips)
	if !slices.Equal(vips, entry) {
		t.Errorf("master load balancer VIPs on external addresses %v, node entry points %v: they must agree", vips, entry)
	}
	refused := 0
	for _, p := range problems {
		if p.Reason == svcmodel.ReasonExternalIPRefused {
			refused++
		}
	}
	if refused != 4 {
		t.Errorf("%d refusals, want 4 (two node addresses, a Service address, one outside the allowed ranges): %+v", refused, problems)
	}
}
