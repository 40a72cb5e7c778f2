package svcmodel

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// hinted is e with zone and node hints.
func hinted(e Endpoint, zones, nodes []string) Endpoint {
	e.Zones, e.Nodes = zones, nodes
	return e
}

func TestEndpointsReadHints(t *testing.T) {
	s := slice(discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{sport("", nil, 80)},
		ep{ip: "10.244.1.1", node: "node1"}, ep{ip: "10.244.2.1", node: "node2"})
	s.Endpoints[0].Hints = &discoveryv1.EndpointHints{
		ForZones: []discoveryv1.ForZone{{Name: "zone-a"}, {Name: "zone-b"}},
		ForNodes: []discoveryv1.ForNode{{Name: "node1"}}}
	got := Endpoints([]*discoveryv1.EndpointSlice{s}, Port{Proto: TCP, Port: 80})
	want := []Endpoint{
		hinted(endpoint("10.244.1.1", 80, "node1", true, true, false), []string{"zone-a", "zone-b"}, []string{"node1"}),
		endpoint("10.244.2.1", 80, "node2", true, true, false),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if !SlicesHinted([]*discoveryv1.EndpointSlice{s}) {
		t.Error("SlicesHinted: false for a slice with hints")
	}
	s.Endpoints[0].Hints = &discoveryv1.EndpointHints{}
	if SlicesHinted([]*discoveryv1.EndpointSlice{s}) {
		t.Error("SlicesHinted: true for empty hints")
	}
}

// TestForClient: which endpoints a client on node1 (zone-a) uses, by kube-proxy's rules.
func TestForClient(t *testing.T) {
	zone := func(ip, node, z string) Endpoint {
		return hinted(endpoint(ip, 80, node, true, true, false), []string{z}, nil)
	}
	a1, b2, c3 := zone("10.244.1.1", "node1", "zone-a"), zone("10.244.2.1", "node2", "zone-b"), zone("10.244.3.1", "node3", "zone-c")
	plain2 := endpoint("10.244.2.2", 80, "node2", true, true, false)
	draining1 := hinted(endpoint("10.244.1.3", 80, "node1", false, true, true), []string{"zone-a"}, nil)
	notReadyA := hinted(endpoint("10.244.1.4", 80, "node1", false, false, false), []string{"zone-a"}, nil)
	// Node hints, as PreferSameNode writes them (zone hints too).
	n1 := hinted(endpoint("10.244.1.5", 80, "node1", true, true, false), []string{"zone-a"}, []string{"node1"})
	n2 := hinted(endpoint("10.244.2.5", 80, "node2", true, true, false), []string{"zone-b"}, []string{"node2"})
	n2a := hinted(endpoint("10.244.2.6", 80, "node2", true, true, false), []string{"zone-a"}, []string{"node2"})
	for _, tc := range []struct {
		name    string
		publish bool
		zone    string // node1's zone
		eps     []Endpoint
		hinted  bool
		want    []Endpoint
	}{
		{"no hints: all usable", false, "zone-a", []Endpoint{endpoint("10.244.1.1", 80, "node1", true, true, false), plain2}, false,
			[]Endpoint{endpoint("10.244.1.1", 80, "node1", true, true, false), plain2}},
		{"zone hints: own zone's", false, "zone-a", []Endpoint{a1, b2, c3}, true, []Endpoint{a1}},
		{"an endpoint for two zones", false, "zone-b", []Endpoint{hinted(a1, []string{"zone-a", "zone-b"}, nil), c3}, true,
			[]Endpoint{hinted(a1, []string{"zone-a", "zone-b"}, nil)}},
		{"no endpoint for the zone: all", false, "zone-c", []Endpoint{a1, b2}, true, []Endpoint{a1, b2}},
		{"node without zone label: all", false, "", []Endpoint{a1, b2}, true, []Endpoint{a1, b2}},
		{"one ready endpoint unhinted: no topology", false, "zone-a", []Endpoint{a1, b2, plain2}, false, []Endpoint{a1, b2, plain2}},
		// Only ready endpoints count: an unhinted terminating one does not switch hints off,
		// and a not-ready one hinted for the zone is not used.
		{"not ready ones do not count", false, "zone-b", []Endpoint{notReadyA, endpoint("10.244.1.9", 80, "node1", false, true, true), b2, a1}, true,
			[]Endpoint{b2}},
		{"none ready: the terminating ones, all", false, "zone-b", []Endpoint{draining1, hinted(endpoint("10.244.2.3", 80, "node2", false, true, true), []string{"zone-b"}, nil)}, false,
			[]Endpoint{draining1, hinted(endpoint("10.244.2.3", 80, "node2", false, true, true), []string{"zone-b"}, nil)}},
		{"publishNotReadyAddresses: not ready ones are candidates", true, "zone-a", []Endpoint{notReadyA, b2}, true, []Endpoint{notReadyA}},
		{"node hints: own node's", false, "zone-a", []Endpoint{n1, n2}, true, []Endpoint{n1}},
		{"node hints, none for node1: its zone's", false, "zone-a", []Endpoint{n2, n2a}, true, []Endpoint{n2a}},
		{"node hints, none for node1 or its zone: all", false, "zone-c", []Endpoint{n2, n2a}, true, []Endpoint{n2, n2a}},
		{"node hints on some only: zone hints", false, "zone-b", []Endpoint{n1, b2}, true, []Endpoint{b2}},
	} {
		s := service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = tc.publish })
		if got := Hinted(tc.eps, s); got != tc.hinted {
			t.Errorf("%s: Hinted %v", tc.name, got)
		}
		if got := ForClient(tc.eps, s, "node1", tc.zone); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ForClient\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
}
