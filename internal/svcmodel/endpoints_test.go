package svcmodel

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// ep is an EndpointSlice endpoint in short; nil conditions take the API's defaults.
type ep struct {
	ip, node                    string
	ready, serving, terminating *bool
}

func slice(addrType discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{AddressType: addrType, Ports: ports}
	for _, e := range eps {
		var addrs []string
		if e.ip != "" {
			addrs = []string{e.ip}
		}
		var node *string
		if e.node != "" {
			node = ptr.To(e.node)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: addrs, NodeName: node,
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return s
}

func sport(name string, proto *corev1.Protocol, port int32) discoveryv1.EndpointPort {
	var n *string
	if name != "" {
		n = ptr.To(name)
	}
	return discoveryv1.EndpointPort{Name: n, Protocol: proto, Port: ptr.To(port)}
}

var (
	yes, no = ptr.To(true), ptr.To(false)
	tcp     = ptr.To(corev1.ProtocolTCP)
	udp     = ptr.To(corev1.ProtocolUDP)
)

func endpoint(ip string, port uint16, node string, ready, serving, terminating bool) Endpoint {
	return Endpoint{IP: netip.MustParseAddr(ip), Port: port, Node: node, Ready: ready, Serving: serving, Terminating: terminating}
}

func TestEndpoints(t *testing.T) {
	v4 := discoveryv1.AddressTypeIPv4
	for _, tc := range []struct {
		name   string
		port   Port
		slices []*discoveryv1.EndpointSlice
		want   []Endpoint
	}{
		{"named port, a number per slice", Port{Name: "http", Proto: TCP, Port: 80}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 8080)}, ep{ip: "10.244.1.10", node: "node1"}),
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 9090)}, ep{ip: "10.244.1.11"}),
		}, []Endpoint{endpoint("10.244.1.10", 8080, "node1", true, true, false), endpoint("10.244.1.11", 9090, "", true, true, false)}},
		{"same name, other protocol: not this port", Port{Name: "dns", Proto: UDP, Port: 53}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("dns", tcp, 5353), sport("dns", udp, 5354)}, ep{ip: "10.244.1.10"}),
		}, []Endpoint{endpoint("10.244.1.10", 5354, "", true, true, false)}},
		{"unnamed port, nil protocol is TCP", Port{Proto: TCP, Port: 80}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("", nil, 8080)}, ep{ip: "10.244.1.10"}),
		}, []Endpoint{endpoint("10.244.1.10", 8080, "", true, true, false)}},
		{"slice without the port, invalid port numbers, IPv6 slice: skipped", Port{Name: "http", Proto: TCP, Port: 80}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("metrics", tcp, 9100)}, ep{ip: "10.244.1.10"}),
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 0)}, ep{ip: "10.244.1.11"}),
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 70000)}, ep{ip: "10.244.1.12"}),
			slice(v4, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: tcp}}, ep{ip: "10.244.1.13"}),
			slice(discoveryv1.AddressTypeIPv6, []discoveryv1.EndpointPort{sport("http", tcp, 8080)}, ep{ip: "fd00::10"}),
			slice(v4, nil, ep{ip: "10.244.1.14"}),
		}, nil},
		{"no address, garbage, an IPv6 address in an IPv4 slice: skipped", Port{Name: "http", Proto: TCP, Port: 80}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 8080)}, ep{}, ep{ip: "bogus"}, ep{ip: "fd00::1"}, ep{ip: "10.244.1.10"}),
		}, []Endpoint{endpoint("10.244.1.10", 8080, "", true, true, false)}},
		{"conditions and their defaults", Port{Name: "http", Proto: TCP, Port: 80}, []*discoveryv1.EndpointSlice{
			slice(v4, []discoveryv1.EndpointPort{sport("http", tcp, 8080)},
				ep{ip: "10.244.1.1"},                          // all nil: ready and serving
				ep{ip: "10.244.1.2", ready: no},               // serving follows ready
				ep{ip: "10.244.1.3", ready: no, serving: yes}, // serving said
				ep{ip: "10.244.1.4", ready: yes, serving: no}, // said, however odd
				ep{ip: "10.244.1.5", ready: no, serving: yes, terminating: yes},
				ep{ip: "10.244.1.6", terminating: no}),
		}, []Endpoint{
			endpoint("10.244.1.1", 8080, "", true, true, false),
			endpoint("10.244.1.2", 8080, "", false, false, false),
			endpoint("10.244.1.3", 8080, "", false, true, false),
			endpoint("10.244.1.4", 8080, "", true, false, false),
			endpoint("10.244.1.5", 8080, "", false, true, true),
			endpoint("10.244.1.6", 8080, "", true, true, false),
		}},
	} {
		if got := Endpoints(tc.slices, tc.port); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
}

func TestUsable(t *testing.T) {
	ready1 := endpoint("10.244.1.1", 80, "node1", true, true, false)
	ready2 := endpoint("10.244.2.1", 80, "node2", true, true, false)
	notReady1 := endpoint("10.244.1.2", 80, "node1", false, false, false)
	draining1 := endpoint("10.244.1.3", 80, "node1", false, true, true)
	dying1 := endpoint("10.244.1.4", 80, "node1", false, false, true)
	readyTerminating1 := endpoint("10.244.1.5", 80, "node1", true, true, true)
	draining2 := endpoint("10.244.2.3", 80, "node2", false, true, true)
	for _, tc := range []struct {
		name    string
		publish bool
		eps     []Endpoint
		usable  []Endpoint
		node1   []Endpoint // LocalUsable on node1
		ready1  []Endpoint // LocalReady on node1: what its health check counts
	}{
		{"none", false, nil, nil, nil, nil},
		{"ready ones only", false, []Endpoint{ready1, notReady1, draining1, ready2}, []Endpoint{ready1, ready2}, []Endpoint{ready1}, []Endpoint{ready1}},
		// node1 falls back to its serving and terminating one, and reports none.
		{"ready and terminating is not ready", false, []Endpoint{readyTerminating1, ready2}, []Endpoint{ready2},
			[]Endpoint{readyTerminating1}, nil},
		{"none ready: serving and terminating", false, []Endpoint{notReady1, draining1, dying1, draining2},
			[]Endpoint{draining1, draining2}, []Endpoint{draining1}, nil},
		// The fallback is the node's own: ready endpoints elsewhere do not take node1's
		// draining one away (kube-proxy's CategorizeEndpoints).
		{"node1 drains while node2 is ready", false, []Endpoint{draining1, ready2}, []Endpoint{ready2}, []Endpoint{draining1}, nil},
		{"node1 has nothing", false, []Endpoint{notReady1, dying1, ready2}, []Endpoint{ready2}, nil, nil},
		{"publishNotReadyAddresses: all", true, []Endpoint{notReady1, dying1, ready2}, []Endpoint{notReady1, dying1, ready2},
			[]Endpoint{notReady1, dying1}, []Endpoint{notReady1, dying1}},
	} {
		s := service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = tc.publish })
		if got := Usable(tc.eps, s); !reflect.DeepEqual(got, tc.usable) {
			t.Errorf("%s: Usable\n got %v\nwant %v", tc.name, got, tc.usable)
		}
		if got := LocalUsable(tc.eps, s, "node1"); !reflect.DeepEqual(got, tc.node1) {
			t.Errorf("%s: LocalUsable node1\n got %v\nwant %v", tc.name, got, tc.node1)
		}
		if got := LocalReady(tc.eps, s, "node1"); !reflect.DeepEqual(got, tc.ready1) {
			t.Errorf("%s: LocalReady node1\n got %v\nwant %v", tc.name, got, tc.ready1)
		}
	}
}
