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
// same Service and slices, on every node.
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
	}{
		{"ready here and there", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.5", node: "node1"}, ep{addr: "10.244.1.6", node: "node1", ready: no}, ep{addr: "10.244.2.5", node: "node2"}),
			http(8080), dns)}},
		{"node1 drains while node2 is ready", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.10", node: "node1", ready: no, serving: yes, terminating: yes}, ep{addr: "10.244.2.10", node: "node2"}),
			http(8080), dns)}},
		{"none ready: serving and terminating", false, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.8", node: "node1", ready: no, serving: yes, terminating: yes},
			ep{addr: "10.244.1.9", node: "node1", ready: no, serving: no, terminating: yes}), http(8080), dns)}},
		{"publishNotReadyAddresses", true, []*discovery.EndpointSlice{withPorts(slice("web", "a",
			ep{addr: "10.244.1.11", node: "node1", ready: no}, ep{addr: "10.244.2.11", node: "node2", ready: no}), http(8080), dns)}},
		{"a named port per slice, one address in two slices", false, []*discovery.EndpointSlice{
			withPorts(slice("web", "a", ep{addr: "10.244.1.5", node: "node1"}, ep{addr: "10.244.1.6", node: "node1"}), http(8080)),
			withPorts(slice("web", "b", ep{addr: "10.244.1.6", node: "node1"}, ep{addr: "10.244.2.7", node: "node2"}), http(9090), dns),
		}},
		{"another Service's and another namespace's slices", false, []*discovery.EndpointSlice{
			withPorts(slice("web", "a", ep{addr: "10.244.2.5", node: "node2"}), http(8080)),
			withPorts(slice("other", "b", ep{addr: "10.244.1.5", node: "node1"}), http(8080)),
			func() *discovery.EndpointSlice {
				s := withPorts(slice("web", "c", ep{addr: "10.244.1.6", node: "node1"}), http(8080))
				s.Namespace = "elsewhere"
				return s
			}(),
		}},
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
		rows, _ := mastersvc.Rows(s, own, nodes)
		ports, _ := svcmodel.Ports(s)
		for _, n := range nodes {
			want := routerBackends(rows, n.Name)
			if got := localEndpoints(s, ports, own, n.Name); !slices.Equal(got, want) {
				t.Errorf("%s, %s: health check endpoints %v; the gateway router balances to %v", tc.name, n.Name, got, want)
			}
			hc, ok := Desired([]*corev1.Service{s}, tc.slices, n.Name, n.IP).Health[32000]
			if !ok || hc.LocalEndpoints != len(want) {
				t.Errorf("%s, %s: health check %+v (present %v); the gateway router balances to %v", tc.name, n.Name, hc, ok, want)
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
