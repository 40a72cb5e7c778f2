package services

import (
	"maps"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// zoned are three nodes in three zones; node4 has no switch.
var zoned = []Node{
	{Name: "node1", IP: netip.MustParseAddr("172.18.0.1"), HasSwitch: true, Zone: "zone-a"},
	{Name: "node2", IP: netip.MustParseAddr("172.18.0.2"), HasSwitch: true, Zone: "zone-b"},
	{Name: "node3", IP: netip.MustParseAddr("172.18.0.3"), HasSwitch: true, Zone: "zone-c"},
	{Name: "node4", Zone: "zone-a"},
}

func withZones(e svcmodel.Endpoint, zones ...string) svcmodel.Endpoint {
	e.Zones = zones
	return e
}

func TestNodeSwitchLBsHints(t *testing.T) {
	ls := func(n string) []nb.ID { return []nb.ID{nb.NewID(nb.Node, n, nb.NodeSwitch)} }
	a, b := withZones(e1, "zone-a"), withZones(e2, "zone-b")
	hintedPort := func(nodePort int32, eps ...svcmodel.Endpoint) portConfig {
		p := port("http", svcmodel.TCP, 80, nodePort, eps...)
		p.hinted = true
		return p
	}
	switchLB := func(node string, opts map[string]string, vips ...string) lb {
		v := map[string]string{}
		for i := 0; i+1 < len(vips); i += 2 {
			v[vips[i]] = vips[i+1]
		}
		return lb{name: "Service_ns/web_TCP_node_switch_" + node, proto: svcmodel.TCP, opts: opts, refs: ls(node), vips: v}
	}
	for _, tc := range []struct {
		name string
		mod  func(*config)
		want map[string]lb
	}{
		{"no hints: nothing", nil, map[string]lb{}},
		// node3's zone has no endpoint: every endpoint; node4 has no switch.
		{"each switch its zone's endpoints", func(c *config) {
			c.ports[0] = hintedPort(0, a, b)
			c.options["affinity_timeout"] = "30"
		}, map[string]lb{
			"lb-node-switch tcp/node1": switchLB("node1", map[string]string{"affinity_timeout": "30"}, "10.96.0.10:80", "10.244.1.10:8080"),
			"lb-node-switch tcp/node2": switchLB("node2", map[string]string{"affinity_timeout": "30"}, "10.96.0.10:80", "10.244.2.10:8080"),
			"lb-node-switch tcp/node3": switchLB("node3", map[string]string{"affinity_timeout": "30"}, "10.96.0.10:80", "10.244.1.10:8080,10.244.2.10:8080"),
		}},
		// ETP Local's switch load balancer of the node's own NodePort is the same row.
		{"ETP Local: one load balancer per switch", func(c *config) {
			c.etpLocal = true
			c.ports[0] = hintedPort(30080, a, b)
		}, map[string]lb{
			"lb-node-switch tcp/node1": switchLB("node1", map[string]string{}, "10.96.0.10:80", "10.244.1.10:8080", "172.18.0.1:30080", "10.244.1.10:8080"),
			"lb-node-switch tcp/node2": switchLB("node2", map[string]string{}, "10.96.0.10:80", "10.244.2.10:8080", "172.18.0.2:30080", "10.244.2.10:8080"),
			"lb-node-switch tcp/node3": switchLB("node3", map[string]string{}, "10.96.0.10:80", "10.244.1.10:8080,10.244.2.10:8080", "172.18.0.3:30080", ""),
		}},
	} {
		c := conf(tc.mod)
		if got := flat(nodeSwitchLBs(c, zoned)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// hintedSlice is slice with zone hints, one zone per endpoint, in order.
func hintedSlice(zones []string, eps ...ep) *discoveryv1.EndpointSlice {
	s := slice("http", corev1.ProtocolTCP, 8080, eps...)
	for i, z := range zones {
		s.Endpoints[i].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
	}
	return s
}

// TestTopologyHints: Rows moves a hinted port's ClusterIP from the cluster load balancer to
// the node switches, each with its zone's endpoints; NodePorts stay cluster-wide; ITP Local
// ignores hints; the rows depend on the nodes (NeedsNodes).
func TestTopologyHints(t *testing.T) {
	eps := []*discoveryv1.EndpointSlice{hintedSlice([]string{"zone-a", "zone-b"},
		ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"})}
	all := "10.244.1.10:8080,10.244.2.10:8080"

	s := svc(nil)
	podNet := netip.MustParsePrefix("10.244.0.0/16")
	if !NeedsNodes(s, eps, podNet) || NeedsNodes(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, ep{ip: "10.244.1.10"})}, podNet) {
		t.Error("NeedsNodes: rows with hints depend on the nodes, without do not")
	}
	if !NeedsNodes(s, []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, ep{ip: "172.18.0.2"})}, podNet) {
		t.Error("NeedsNodes: an endpoint outside the pod network (maybe a node's address) does not depend on the nodes")
	}
	got := lbs(t, mustRows(t, s, eps))
	if keys(got) != "[lb-node-switch tcp/node1 lb-node-switch tcp/node2 lb-node-switch tcp/node3]" {
		t.Fatalf("rows %s", keys(got))
	}
	for node, want := range map[string]string{"node1": "10.244.1.10:8080", "node2": "10.244.2.10:8080", "node3": all} {
		if v := got["lb-node-switch tcp/"+node].Vips; !maps.Equal(v, map[string]string{"10.96.0.10:80": want}) {
			t.Errorf("%s's switch: %v, want the ClusterIP to %s", node, v, want)
		}
	}

	// A NodePort keeps the cluster load balancer, with every endpoint.
	np := svc(func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080 })
	got = lbs(t, mustRows(t, np, eps))
	if v := got["lb-cluster tcp"].Vips; !maps.Equal(v, map[string]string{"^NODEIP:30080": all, "169.254.100.1:30080": all}) {
		t.Errorf("NodePort Service's cluster LB: %v", v)
	}
	if v := got["lb-node-switch tcp/node1"].Vips; !maps.Equal(v, map[string]string{"10.96.0.10:80": "10.244.1.10:8080"}) {
		t.Errorf("NodePort Service, node1's switch: %v", v)
	}

	// ITP Local: the node's own endpoints, hints or not.
	itp := svc(func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	})
	got = lbs(t, mustRows(t, itp, eps))
	if v := got["lb-node-switch tcp/node3"].Vips; !maps.Equal(v, map[string]string{"10.96.0.10:80": ""}) {
		t.Errorf("ITP Local, node3 without endpoints: %v", v)
	}
	if NeedsNodes(svc(func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}),
		[]*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080)}, podNet) {
		t.Error("NeedsNodes: ITP Cluster without hints")
	}

	// One ready endpoint without a hint: no topology, the cluster load balancer.
	partial := []*discoveryv1.EndpointSlice{hintedSlice([]string{"zone-a"},
		ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"})}
	got = lbs(t, mustRows(t, s, partial))
	if keys(got) != "[lb-cluster tcp]" || got["lb-cluster tcp"].Vips["10.96.0.10:80"] != all {
		t.Errorf("partly hinted: %s %v", keys(got), got["lb-cluster tcp"])
	}
}

func mustRows(t *testing.T, s *corev1.Service, eps []*discoveryv1.EndpointSlice) []nb.Row {
	t.Helper()
	rows, problems := Rows(s, eps, zoned, allowAll)
	if len(problems) > 0 {
		t.Fatalf("problems %v", problems)
	}
	for _, r := range rows {
		if r.ID.Role == nb.ServiceNodeSwitchLB && (len(r.ReferencedBy) != 1 || r.ReferencedBy[0] != nb.NewID(nb.Node, r.ID.Scope[len("tcp/"):], nb.NodeSwitch)) {
			t.Errorf("%s hangs on %v", r.ID, r.ReferencedBy)
		}
	}
	return rows
}

// TestTopologyHintsHostEndpoints: hints and host-network endpoints together. Each node
// switch holds its zone's endpoints, its own node's address written as its management
// address (the hairpin of nodeBackends), and the Service has no cluster ClusterIP VIP.
func TestTopologyHintsHostEndpoints(t *testing.T) {
	withMgmt := []Node{
		{Name: "node1", IP: netip.MustParseAddr("172.18.0.1"), HasSwitch: true, Zone: "zone-a", MgmtIP: netip.MustParseAddr("10.244.1.2")},
		{Name: "node2", IP: netip.MustParseAddr("172.18.0.2"), HasSwitch: true, Zone: "zone-b", MgmtIP: netip.MustParseAddr("10.244.2.2")},
	}
	eps := []*discoveryv1.EndpointSlice{hintedSlice([]string{"zone-a", "zone-b"},
		ep{ip: "172.18.0.1", node: "node1"}, ep{ip: "172.18.0.2", node: "node2"})}
	rows, problems := Rows(svc(nil), eps, withMgmt, allowAll)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	got := lbs(t, rows)
	if c, ok := got["lb-cluster tcp"]; ok && c.Vips["10.96.0.10:80"] != "" {
		t.Errorf("the cluster LB kept the ClusterIP: %v", c.Vips)
	}
	for node, want := range map[string]string{"node1": "10.244.1.2:8080", "node2": "10.244.2.2:8080"} {
		if v := got["lb-node-switch tcp/"+node]; v == nil || !maps.Equal(v.Vips, map[string]string{"10.96.0.10:80": want}) {
			t.Errorf("%s's switch: %v, want the ClusterIP to its own host at its management address %s", node, v, want)
		}
	}
}
