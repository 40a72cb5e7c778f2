package svcmodel

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func service(mod func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func TestImplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*corev1.Service)
		want bool
	}{
		{"ClusterIP", nil, true},
		{"NodePort", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, true},
		{"LoadBalancer", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, true},
		{"headless", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}, false},
		{"no ClusterIP", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil }, false},
		{"no ClusterIP, NodePort", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeNodePort, "", nil
		}, false},
		{"ExternalName", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", "x.example"
		}, false},
		{"ExternalName with a stale ClusterIP", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }, false},
		{"another proxy's", func(s *corev1.Service) { s.Labels = map[string]string{ProxyNameLabel: "other"} }, false},
		{"another proxy's, empty name", func(s *corev1.Service) { s.Labels = map[string]string{ProxyNameLabel: ""} }, false},
		{"labelled headless", func(s *corev1.Service) { s.Labels = map[string]string{HeadlessLabel: ""} }, false},
		{"unrelated label", func(s *corev1.Service) { s.Labels = map[string]string{"app": "web"} }, true},
	} {
		if got := Implemented(service(tc.mod)); got != tc.want {
			t.Errorf("%s: Implemented %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrafficPolicies(t *testing.T) {
	local, cluster := corev1.ServiceExternalTrafficPolicyLocal, corev1.ServiceExternalTrafficPolicyCluster
	for _, tc := range []struct {
		typ       corev1.ServiceType
		etp       corev1.ServiceExternalTrafficPolicy
		itp       *corev1.ServiceInternalTrafficPolicy
		ext, intl bool
	}{
		{corev1.ServiceTypeClusterIP, "", nil, false, false},
		{corev1.ServiceTypeClusterIP, local, nil, false, false}, // no external entry points
		{corev1.ServiceTypeNodePort, local, nil, true, false},
		{corev1.ServiceTypeLoadBalancer, local, nil, true, false},
		{corev1.ServiceTypeLoadBalancer, cluster, nil, false, false},
		{corev1.ServiceTypeClusterIP, "", ptr.To(corev1.ServiceInternalTrafficPolicyLocal), false, true},
		{corev1.ServiceTypeNodePort, local, ptr.To(corev1.ServiceInternalTrafficPolicyLocal), true, true},
		{corev1.ServiceTypeClusterIP, "", ptr.To(corev1.ServiceInternalTrafficPolicyCluster), false, false},
	} {
		s := service(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.InternalTrafficPolicy = tc.typ, tc.etp, tc.itp
		})
		if ExternalLocal(s) != tc.ext || InternalLocal(s) != tc.intl {
			t.Errorf("%s etp=%q itp=%v: ExternalLocal %v InternalLocal %v, want %v %v",
				tc.typ, tc.etp, tc.itp, ExternalLocal(s), InternalLocal(s), tc.ext, tc.intl)
		}
	}
}

func TestProto(t *testing.T) {
	for _, tc := range []struct {
		api  corev1.Protocol
		want Proto
		ok   bool
		nb   string
		str  string
	}{
		{corev1.ProtocolTCP, TCP, true, "tcp", "TCP"},
		{"", TCP, true, "tcp", "TCP"},
		{corev1.ProtocolUDP, UDP, true, "udp", "UDP"},
		{corev1.ProtocolSCTP, SCTP, true, "sctp", "SCTP"},
		{"ICMP", 0, false, "", "Proto(0)"},
	} {
		p, ok := ParseProto(tc.api)
		if p != tc.want || ok != tc.ok || p.NB() != tc.nb || p.String() != tc.str || p.Valid() != tc.ok {
			t.Errorf("%q: %v %v, NB %q, String %q, Valid %v", tc.api, p, ok, p.NB(), p.String(), p.Valid())
		}
	}
	if TCP.IPProto() != 6 || UDP.IPProto() != 17 || SCTP.IPProto() != 132 {
		t.Errorf("IP protocol numbers %d %d %d", TCP.IPProto(), UDP.IPProto(), SCTP.IPProto())
	}
}

func TestPorts(t *testing.T) {
	ports := []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
		{Name: "weird", Protocol: "ICMP", Port: 1},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
		{Name: "default", Port: 81},
		{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9000},
	}
	for _, tc := range []struct {
		typ  corev1.ServiceType
		want []Port
	}{
		{corev1.ServiceTypeNodePort, []Port{{"http", TCP, 80, 30080}, {"dns", UDP, 53, 30053}, {"default", TCP, 81, 0}, {"sctp", SCTP, 9000, 0}}},
		{corev1.ServiceTypeLoadBalancer, []Port{{"http", TCP, 80, 30080}, {"dns", UDP, 53, 30053}, {"default", TCP, 81, 0}, {"sctp", SCTP, 9000, 0}}},
		// A ClusterIP Service has no node ports, whatever its spec says.
		{corev1.ServiceTypeClusterIP, []Port{{"http", TCP, 80, 0}, {"dns", UDP, 53, 0}, {"default", TCP, 81, 0}, {"sctp", SCTP, 9000, 0}}},
	} {
		got, problems := Ports(service(func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports = tc.typ, ports }))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ports\n got %v\nwant %v", tc.typ, got, tc.want)
		}
		want := []Problem{{ReasonUnsupportedProtocol, `port "weird": protocol "ICMP" is not supported (TCP, UDP, SCTP); the port is skipped`}}
		if !reflect.DeepEqual(problems, want) {
			t.Errorf("%s: problems %v", tc.typ, problems)
		}
	}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestClusterIPs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ip       string
		ips      []string
		want     []netip.Addr
		problems []Problem
	}{
		{"list", "10.96.0.10", []string{"10.96.0.10"}, addrs("10.96.0.10"), nil},
		{"old object without the list", "10.96.0.11", nil, addrs("10.96.0.11"), nil},
		{"dual stack: IPv4 kept", "10.96.0.10", []string{"10.96.0.10", "fd00::10"}, addrs("10.96.0.10"),
			[]Problem{{ReasonUnsupportedIPFamily, "clusterIP fd00::10: the cluster network is IPv4 only; skipped"}}},
		{"garbage", "x", []string{"x"}, nil, []Problem{{ReasonInvalidIP, `clusterIP "x" is not an IP address; skipped`}}},
	} {
		got, problems := ClusterIPs(service(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = tc.ip, tc.ips }))
		if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(problems, tc.problems) {
			t.Errorf("%s: %v %v", tc.name, got, problems)
		}
	}
}

func TestExternalIPs(t *testing.T) {
	ingress := []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {Hostname: "lb.example"}, {IP: "fd00::7"}}
	for _, tc := range []struct {
		name     string
		typ      corev1.ServiceType
		external []string
		want     []netip.Addr
		problems []Problem
	}{
		{"none", corev1.ServiceTypeClusterIP, nil, nil, nil},
		{"externalIPs; a ClusterIP Service's ingress is ignored", corev1.ServiceTypeClusterIP, []string{"192.0.2.10"}, addrs("192.0.2.10"), nil},
		{"LoadBalancer: externalIPs, then ingress IPs", corev1.ServiceTypeLoadBalancer, []string{"192.0.2.10", "bogus", "fd00::1"},
			addrs("192.0.2.10", "198.51.100.7"), []Problem{
				{ReasonInvalidIP, `externalIP "bogus" is not an IP address; skipped`},
				{ReasonUnsupportedIPFamily, "externalIP fd00::1: the cluster network is IPv4 only; skipped"},
				{ReasonUnsupportedIPFamily, "load balancer ingress IP fd00::7: the cluster network is IPv4 only; skipped"},
			}},
	} {
		got, problems := ExternalIPs(service(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalIPs, s.Status.LoadBalancer.Ingress = tc.typ, tc.external, ingress
		}), AllowAll)
		if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(problems, tc.problems) {
			t.Errorf("%s:\n got %v %v\nwant %v %v", tc.name, got, problems, tc.want, tc.problems)
		}
	}
}

func ExampleProto() {
	p, _ := ParseProto(corev1.ProtocolUDP)
	fmt.Println(p, p.NB(), p.IPProto())
	// Output: UDP udp 17
}
