package services

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

var (
	nodeIP = netip.MustParseAddr("172.18.0.1")
	pods   = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
)

func svc(name string, typ corev1.ServiceType, mut func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
		}},
	}
	if typ == corev1.ServiceTypeClusterIP {
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
	if mut != nil {
		mut(s)
	}
	return s
}

type ep struct {
	addr, node                  string
	ready, serving, terminating *bool
}

// slice is an EndpointSlice of Service svcName with the ports of svc's: http and dns, as the
// EndpointSlice controller lists them (the endpoints of a port are the slices that name it).
func slice(svcName, name string, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discovery.LabelServiceName: svcName}},
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))},
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(5353))},
		},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{e.addr}, NodeName: ptr.To(e.node),
			Conditions: discovery.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return s
}

func TestDesiredEntryPoints(t *testing.T) {
	tcp, udp := openflow.IPProtoTCP, openflow.IPProtoUDP
	vip, ing := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.20")
	svcs := []*corev1.Service{
		svc("cip", corev1.ServiceTypeClusterIP, nil),
		svc("np", corev1.ServiceTypeNodePort, nil),
		svc("lb", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.20"
			s.Spec.Ports = s.Spec.Ports[:1]
			s.Spec.Ports[0].NodePort = 30081
			s.Spec.ExternalIPs = []string{vip.String(), "fd00::1", "bogus"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ing.String()}, {Hostname: "lb.example"}}
		}),
		svc("eip", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{vip.String()} }),
		svc("other-proxy", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Labels = map[string]string{svcmodel.ProxyNameLabel: "foo"}
			s.Spec.Ports[0].NodePort = 31000
		}),
		svc("headless", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP = corev1.ClusterIPNone
			s.Spec.ExternalIPs = []string{"192.0.2.99"}
		}),
		svc("extname", corev1.ServiceTypeExternalName, func(s *corev1.Service) { s.Spec.ClusterIP = "" }),
		svc("icmp", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Protocol: "ICMP", Port: 1, NodePort: 31001}}
		}),
		svc("sctp", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolSCTP, Port: 9, NodePort: 31002}}
		}),
	}
	got := Desired(svcs, nil, "node1", nodeIP, pods, allowAll)
	wantPorts := []gateway.NodePort{
		{Protocol: tcp, Port: 80, IP: vip}, // eip and lb: one entry
		{Protocol: tcp, Port: 80, IP: ing},
		{Protocol: tcp, Port: 30080},
		{Protocol: tcp, Port: 30081},
		{Protocol: udp, Port: 53, IP: vip},
		{Protocol: udp, Port: 30053},
		{Protocol: openflow.IPProtoSCTP, Port: 31002},
	}
	if !reflect.DeepEqual(got.NodePorts, wantPorts) {
		t.Errorf("entry points:\n got %v\nwant %v", got.NodePorts, wantPorts)
	}
	c1, c2 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.20")
	wantNAT := []localnat.Rule{
		{Protocol: tcp, NodeIP: nodeIP, NodePort: 30080, ClusterIP: c1, Port: 80},
		{Protocol: tcp, NodeIP: nodeIP, NodePort: 30081, ClusterIP: c2, Port: 80},
		{Protocol: udp, NodeIP: nodeIP, NodePort: 30053, ClusterIP: c1, Port: 53},
	}
	if !reflect.DeepEqual(got.LocalNAT, wantNAT) {
		t.Errorf("local NAT:\n got %v\nwant %v", got.LocalNAT, wantNAT)
	}
	if len(got.Health) != 0 {
		t.Errorf("health checks without ETP Local: %v", got.Health)
	}
}

// The host's own connection to an externalTrafficPolicy=Local NodePort keeps the node IP as
// its source (kube-proxy's short circuit; upstream "... when ExternalTrafficPolicy changes"),
// unless a backend is not a pod: a host-network endpoint (another node's address, or this
// node's) or an address outside the cluster would answer the node IP past the node switch
// that must undo the DNAT. Per port: a port whose endpoints are all pods keeps it.
func TestDesiredKeepSource(t *testing.T) {
	tcp, udp := openflow.IPProtoTCP, openflow.IPProtoUDP
	local := func(name, clusterIP string, nodePorts ...int32) *corev1.Service {
		return svc(name, corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.ClusterIP = clusterIP
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = nodePorts[i]
			}
		})
	}
	svcs := []*corev1.Service{
		local("pods", "10.96.0.1", 30001, 30002),
		local("no-endpoints", "10.96.0.2", 30003, 30004),
		local("host-network", "10.96.0.3", 30005, 30006),
		local("own-host", "10.96.0.4", 30007, 30008),
		local("outside", "10.96.0.5", 30009, 30010),
		svc("cluster", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.6"
			s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort = 30011, 30012
		}),
	}
	// The UDP port of "host-network" has only pod endpoints (a slice of its own).
	hn := slice("host-network", "hn", ep{addr: "172.18.0.2", node: "node2"})
	hn.Ports = hn.Ports[:1]
	hnUDP := slice("host-network", "hn-udp", ep{addr: "10.244.2.5", node: "node2"})
	hnUDP.Ports = hnUDP.Ports[1:]
	eps := []*discovery.EndpointSlice{
		slice("pods", "x", ep{addr: "10.244.2.5", node: "node2"}, ep{addr: "10.244.3.5", node: "node3"}),
		hn, hnUDP,
		slice("own-host", "x", ep{addr: "10.244.2.5", node: "node2"}, ep{addr: nodeIP.String(), node: "node1"}),
		slice("outside", "x", ep{addr: "192.0.2.7"}),
		slice("cluster", "x", ep{addr: "10.244.2.5", node: "node2"}),
	}
	rule := func(proto uint8, nodePort uint16, clusterIP string, port uint16, keep bool) localnat.Rule {
		return localnat.Rule{Protocol: proto, NodeIP: nodeIP, NodePort: nodePort, ClusterIP: netip.MustParseAddr(clusterIP), Port: port, KeepSource: keep}
	}
	want := []localnat.Rule{
		rule(tcp, 30001, "10.96.0.1", 80, true),
		rule(tcp, 30003, "10.96.0.2", 80, true),
		rule(tcp, 30005, "10.96.0.3", 80, false),
		rule(tcp, 30007, "10.96.0.4", 80, false),
		rule(tcp, 30009, "10.96.0.5", 80, false),
		rule(tcp, 30011, "10.96.0.6", 80, false),
		rule(udp, 30002, "10.96.0.1", 53, true),
		rule(udp, 30004, "10.96.0.2", 53, true),
		rule(udp, 30006, "10.96.0.3", 53, true),
		rule(udp, 30008, "10.96.0.4", 53, false),
		rule(udp, 30010, "10.96.0.5", 53, false),
		rule(udp, 30012, "10.96.0.6", 53, false),
	}
	if got := Desired(svcs, eps, "node1", nodeIP, pods, allowAll).LocalNAT; !reflect.DeepEqual(got, want) {
		t.Errorf("local NAT:\n got %v\nwant %v", got, want)
	}
	// Without pod networks the node knows no backend to be a pod: every rule masquerades.
	for _, r := range Desired(svcs, eps, "node1", nodeIP, nil, allowAll).LocalNAT {
		if r.KeepSource && r.NodePort != 30003 && r.NodePort != 30004 {
			t.Errorf("without pod networks: %v", r)
		}
	}
}

func TestDesiredHealthChecks(t *testing.T) {
	local := func(name string, hc int32, mut func(*corev1.Service)) *corev1.Service {
		return svc(name, corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = hc
			if mut != nil {
				mut(s)
			}
		})
	}
	yes, no := ptr.To(true), ptr.To(false)
	svcs := []*corev1.Service{
		local("ready", 32001, nil),
		local("none-here", 32002, nil),
		local("fallback", 32003, nil),
		local("not-ready", 32004, nil),
		local("publish", 32005, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		svc("cluster", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 32006 }),
	}
	eps := []*discovery.EndpointSlice{
		// Two local addresses, one of them in two slices, a remote one, a not-ready one.
		slice("ready", "ready-a", ep{addr: "10.244.1.5", node: "node1"}, ep{addr: "10.244.1.6", node: "node1", ready: yes},
			ep{addr: "10.244.2.5", node: "node2"}, ep{addr: "10.244.1.7", node: "node1", ready: no}),
		slice("ready", "ready-b", ep{addr: "10.244.1.6", node: "node1"},
			ep{addr: "10.244.1.13", node: "node1", ready: yes, terminating: yes}), // terminating: not ready
		slice("none-here", "x", ep{addr: "10.244.2.6", node: "node2"}),
		// No ready endpoint anywhere: the gateway router falls back to the serving and
		// terminating one, which the health check does not count (503: external load
		// balancers drain the node; upstream "should fail health check node port if there
		// are only terminating endpoints").
		slice("fallback", "x", ep{addr: "10.244.1.8", node: "node1", ready: no, serving: yes, terminating: yes},
			ep{addr: "10.244.1.9", node: "node1", ready: no, serving: no, terminating: yes}),
		// A ready remote one: the local serving-terminating one is still the backend of this
		// node's gateway router (the fallback is per node, svcmodel.LocalUsable), and the
		// health check still counts it none (svcmodel.LocalReady).
		slice("not-ready", "x", ep{addr: "10.244.1.10", node: "node1", ready: no, serving: yes, terminating: yes},
			ep{addr: "10.244.2.10", node: "node2"}),
		slice("publish", "x", ep{addr: "10.244.1.11", node: "node1", ready: no}),
		// Another namespace's slice of the same name.
		func() *discovery.EndpointSlice {
			s := slice("none-here", "y", ep{addr: "10.244.1.12", node: "node1"})
			s.Namespace = "other"
			return s
		}(),
	}
	got := Desired(svcs, eps, "node1", nodeIP, pods, allowAll).Health
	want := map[uint16]HealthCheck{
		32001: {"ns", "ready", 2},
		32002: {"ns", "none-here", 0},
		32003: {"ns", "fallback", 0},
		32004: {"ns", "not-ready", 0},
		32005: {"ns", "publish", 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("health checks:\n got %v\nwant %v", got, want)
	}
}

// A Service without a ClusterIP has no load balancer on the master (svcmodel.Implemented),
// so the node must not send its NodePorts or external IPs to the gateway router either.
func TestDesiredNoClusterIP(t *testing.T) {
	s := svc("no-ip", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		s.Spec.ClusterIP = ""
		s.Spec.ExternalIPs = []string{"192.0.2.10"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32000
	})
	if got := Desired([]*corev1.Service{s}, nil, "node1", nodeIP, pods, allowAll); len(got.NodePorts)+len(got.LocalNAT)+len(got.Health) != 0 {
		t.Errorf("a Service without a ClusterIP: %+v", got)
	}
}
