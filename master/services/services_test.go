package services

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

func svc(mod func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}}},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

type ep struct {
	ip, node                  string
	ready, serving, terminate *bool
}

// slice is one EndpointSlice whose port "name"/proto is number port.
func slice(name string, proto corev1.Protocol, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}}}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: &e.node,
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminate}})
	}
	return s
}

var nodes = []Node{
	{Name: "node1", IP: netip.MustParseAddr("172.18.0.1"), HasSwitch: true, MgmtIP: netip.MustParseAddr("10.244.1.2")},
	{Name: "node2", IP: netip.MustParseAddr("172.18.0.2"), HasSwitch: true, MgmtIP: netip.MustParseAddr("10.244.2.2")},
}

// lbs returns the rows by "role scope" with their VIPs.
func lbs(t *testing.T, rows []nb.Row) map[string]*nbdb.LoadBalancer {
	t.Helper()
	out := map[string]*nbdb.LoadBalancer{}
	for _, r := range rows {
		if err := r.ID.Validate(); err != nil {
			t.Fatal(err)
		}
		out[string(r.ID.Role)+" "+r.ID.Scope] = r.Model.(*nbdb.LoadBalancer)
	}
	return out
}

func keys[V any](m map[string]V) string { return fmt.Sprint(slices.Sorted(maps.Keys(m))) }

func TestClusterIPMultiPortMultiProtocol(t *testing.T) {
	s := svc(func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
			{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9000},
		}
	})
	rows, problems := Rows(s, []*discoveryv1.EndpointSlice{
		slice("http", corev1.ProtocolTCP, 8080, ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"}),
		slice("dns", corev1.ProtocolUDP, 5353, ep{ip: "10.244.1.10", node: "node1"}),
		slice("dns-tcp", corev1.ProtocolTCP, 5353, ep{ip: "10.244.1.10", node: "node1"}),
		slice("sctp", corev1.ProtocolSCTP, 9000, ep{ip: "10.244.2.10", node: "node2"}),
	}, nodes, allowAll)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	got := lbs(t, rows)
	if keys(got) != "[lb-cluster sctp lb-cluster tcp lb-cluster udp]" {
		t.Fatalf("rows %s", keys(got))
	}
	tcp := got["lb-cluster tcp"]
	want := map[string]string{"10.96.0.10:80": "10.244.1.10:8080,10.244.2.10:8080", "10.96.0.10:53": "10.244.1.10:5353"}
	if !maps.Equal(tcp.Vips, want) || *tcp.Protocol != "tcp" || tcp.Name != "Service_ns/web_TCP_cluster" {
		t.Errorf("tcp LB %+v", tcp)
	}
	if got["lb-cluster udp"].Vips["10.96.0.10:53"] != "10.244.1.10:5353" || got["lb-cluster sctp"].Vips["10.96.0.10:9000"] != "10.244.2.10:9000" {
		t.Errorf("udp %v sctp %v", got["lb-cluster udp"].Vips, got["lb-cluster sctp"].Vips)
	}
	if tcp.Options["reject"] != "true" || tcp.Options["template"] != "" || tcp.Options["neighbor_responder"] != "none" {
		t.Errorf("options %v", tcp.Options)
	}
	for _, r := range rows {
		if len(r.ReferencedBy) != 1 || r.ReferencedBy[0].Role != nb.ClusterLBGroup {
			t.Errorf("%s referenced by %v", r.ID, r.ReferencedBy)
		}
	}
}

func TestNamedTargetPortPerSlice(t *testing.T) {
	rows, _ := Rows(svc(nil), []*discoveryv1.EndpointSlice{
		slice("http", corev1.ProtocolTCP, 8080, ep{ip: "10.244.1.10"}),
		slice("http", corev1.ProtocolTCP, 9090, ep{ip: "10.244.1.11"}),
	}, nil, allowAll)
	if v := lbs(t, rows)["lb-cluster tcp"].Vips["10.96.0.10:80"]; v != "10.244.1.10:8080,10.244.1.11:9090" {
		t.Errorf("backends %q", v)
	}
}

func TestManyBackends(t *testing.T) {
	var eps []ep
	for i := range 150 {
		eps = append(eps, ep{ip: fmt.Sprintf("10.244.%d.%d", 1+i/100, 10+i%100)})
	}
	rows, _ := Rows(svc(nil), []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, eps...)}, nil, allowAll)
	if n := len(strings.Split(lbs(t, rows)["lb-cluster tcp"].Vips["10.96.0.10:80"], ",")); n != 150 {
		t.Errorf("%d backends, want 150", n)
	}
}

func TestReadiness(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	for _, tc := range []struct {
		name       string
		publish    bool
		eps        []ep
		wantBackns string
	}{
		{"ready only", false, []ep{{ip: "10.244.1.1"}, {ip: "10.244.1.2", ready: no}, {ip: "10.244.1.3", ready: no, serving: yes, terminate: yes}}, "10.244.1.1:8080"},
		{"none ready: serving terminating", false, []ep{{ip: "10.244.1.2", ready: no}, {ip: "10.244.1.3", ready: no, serving: yes, terminate: yes},
			{ip: "10.244.1.4", ready: no, serving: no, terminate: yes}}, "10.244.1.3:8080"},
		{"publishNotReadyAddresses", true, []ep{{ip: "10.244.1.1"}, {ip: "10.244.1.2", ready: no}}, "10.244.1.1:8080,10.244.1.2:8080"},
		{"no endpoints: empty VIP, reject", false, nil, ""},
	} {
		s := svc(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = tc.publish })
		rows, _ := Rows(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, tc.eps...)}, nil, allowAll)
		lb := lbs(t, rows)["lb-cluster tcp"]
		if got, ok := lb.Vips["10.96.0.10:80"]; !ok || got != tc.wantBackns || lb.Options["reject"] != "true" {
			t.Errorf("%s: backends %q (present %v), options %v; want %q", tc.name, got, ok, lb.Options, tc.wantBackns)
		}
	}
}

func TestNodePortLoadBalancerExternalIPsAffinity(t *testing.T) {
	s := svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalIPs = []string{"192.0.2.10"}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(5))}}
	})
	rows, _ := Rows(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, ep{ip: "10.244.1.10", node: "node1"})}, nodes, allowAll)
	got := lbs(t, rows)
	if keys(got) != "[lb-cluster tcp]" {
		t.Fatalf("rows %s: NodePort must not cost a row per node", keys(got))
	}
	lb := got["lb-cluster tcp"]
	b := "10.244.1.10:8080"
	// With affinity a VIP per node IP, not the ^NODEIP template, which ovn-controller cannot
	// parse in affinity flows (addNodePortVIPs).
	want := map[string]string{"10.96.0.10:80": b, "172.18.0.1:30080": b, "172.18.0.2:30080": b, "169.254.100.1:30080": b,
		"192.0.2.10:80": b, "198.51.100.7:80": b}
	if !maps.Equal(lb.Vips, want) {
		t.Errorf("vips %v", lb.Vips)
	}
	if _, ok := lb.Options["template"]; ok || lb.Options["affinity_timeout"] != "5" {
		t.Errorf("options %v", lb.Options)
	}
}

func TestExternalTrafficPolicyLocal(t *testing.T) {
	s := svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalIPs = []string{"192.0.2.10"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	noIP := append(nodes, Node{Name: "node3", HasSwitch: true}) // no chassis yet: no GR
	rows, _ := Rows(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080,
		ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"}, ep{ip: "10.244.2.11", node: "node2"})}, noIP, allowAll)
	got := lbs(t, rows)
	// node3 has a switch but no IP yet: no NodePort VIP on it.
	if keys(got) != "[lb-cluster tcp lb-node-router tcp/node1 lb-node-router tcp/node2 lb-node-switch tcp/node1 lb-node-switch tcp/node2]" {
		t.Fatalf("rows %s", keys(got))
	}
	if v := got["lb-node-switch tcp/node2"].Vips; !maps.Equal(v, map[string]string{"172.18.0.2:30080": "10.244.2.10:8080,10.244.2.11:8080"}) {
		t.Errorf("node2's switch: its own pods reaching its NodePort: %v", v)
	}
	if v := got["lb-cluster tcp"].Vips; len(v) != 1 || v["10.96.0.10:80"] != "10.244.1.10:8080,10.244.2.10:8080,10.244.2.11:8080" {
		t.Errorf("cluster LB keeps only the ClusterIP: %v", v)
	}
	n2 := got["lb-node-router tcp/node2"]
	local := "10.244.2.10:8080,10.244.2.11:8080"
	want := map[string]string{"172.18.0.2:30080": local, "169.254.100.1:30080": local, "192.0.2.10:80": local}
	if !maps.Equal(n2.Vips, want) || n2.Options["skip_snat"] != "true" || n2.Options["reject"] != "" || n2.Name != "Service_ns/web_TCP_node_router_node2" {
		t.Errorf("node2 LB %+v", n2)
	}
	for _, r := range rows {
		if r.ID.Role == nb.ServiceNodeRouterLB && r.ID.Scope == "tcp/node1" && (len(r.ReferencedBy) != 1 || r.ReferencedBy[0] != nb.NewID(nb.Node, "node1", nb.GatewayRouter)) {
			t.Errorf("node1 LB referenced by %v", r.ReferencedBy)
		}
	}
}

func TestInternalTrafficPolicyLocal(t *testing.T) {
	s := svc(func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	})
	rows, _ := Rows(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, ep{ip: "10.244.1.10", node: "node1"})}, nodes, allowAll)
	got := lbs(t, rows)
	if keys(got) != "[lb-node-switch tcp/node1 lb-node-switch tcp/node2]" {
		t.Fatalf("rows %s", keys(got))
	}
	if got["lb-node-switch tcp/node1"].Vips["10.96.0.10:80"] != "10.244.1.10:8080" {
		t.Errorf("node1 %v", got["lb-node-switch tcp/node1"].Vips)
	}
	if v, ok := got["lb-node-switch tcp/node2"].Vips["10.96.0.10:80"]; !ok || v != "" {
		t.Errorf("node2 without local endpoints: %q %v", v, ok)
	}
}

func TestNotOurs(t *testing.T) {
	for name, s := range map[string]*corev1.Service{
		"headless": svc(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }),
		"externalName": svc(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", "x.example"
		}),
		"other proxy": svc(func(s *corev1.Service) { s.Labels = map[string]string{svcmodel.ProxyNameLabel: "other"} }),
	} {
		if rows, problems := Rows(s, nil, nodes, allowAll); len(rows)+len(problems) != 0 {
			t.Errorf("%s: %d rows, %v", name, len(rows), problems)
		}
	}
}

func TestBadInput(t *testing.T) {
	s := svc(func(s *corev1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "weird", Protocol: "ICMP", Port: 1})
	})
	rows, problems := Rows(s, nil, nil, allowAll)
	if len(problems) != 2 || problems[0].Reason != ReasonUnsupportedIPFamily || problems[1].Reason != ReasonUnsupportedProtocol {
		t.Errorf("problems %v", problems)
	}
	if got := lbs(t, rows); keys(got) != "[lb-cluster tcp]" || len(got["lb-cluster tcp"].Vips) != 1 {
		t.Errorf("the good part is kept: %s", keys(got))
	}
}

// allowAll admits every unicast IPv4 external address outside the tests' pod range, for tests
// about everything but the external IP policy.
var allowAll = svcmodel.ExternalIPPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
	Reserved: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}

// svcmodel.VIPs, what --max-namespace-vips counts, is exactly the VIPs of a Service that
// has no load balancer per node, and bounds those of one that has, on these nodes.
func TestVIPBound(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	prefer := "PreferClose"
	eps := []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080,
		ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"})}
	for name, mod := range map[string]func(*corev1.Service){
		"ClusterIP": nil,
		"NodePort": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080
		},
		"LoadBalancer": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeLoadBalancer, 30080
			s.Spec.ExternalIPs = []string{"192.0.2.10", "192.0.2.11"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
		},
		"ETP Local": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeLoadBalancer, 30080
			s.Spec.ExternalIPs = []string{"192.0.2.10"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		},
		"ITP Local": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080
			s.Spec.InternalTrafficPolicy = &local
		},
		"affinity": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		},
		"traffic distribution": func(s *corev1.Service) { s.Spec.TrafficDistribution = &prefer },
	} {
		s := svc(mod)
		rows, problems := Rows(s, eps, nodes, allowAll)
		if len(problems) > 0 {
			t.Fatalf("%s: %v", name, problems)
		}
		got, bound := VIPs(rows), svcmodel.VIPs(s, len(nodes))
		if svcmodel.PerNode(s) && got > bound || !svcmodel.PerNode(s) && got != bound {
			t.Errorf("%s: %d VIPs, svcmodel.VIPs %d (per node: %v)", name, got, bound, svcmodel.PerNode(s))
		}
	}
}
