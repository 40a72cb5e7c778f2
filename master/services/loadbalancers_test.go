package services

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// The stages of Rows, each on a config written out by hand.

var (
	lbGroup = nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterLBGroup)
	cip     = netip.MustParseAddr("10.96.0.10")
	eip     = netip.MustParseAddr("192.0.2.10")
	e1      = svcmodel.Endpoint{IP: netip.MustParseAddr("10.244.1.10"), Port: 8080, Node: "node1", Ready: true, Serving: true}
	e2      = svcmodel.Endpoint{IP: netip.MustParseAddr("10.244.2.10"), Port: 8080, Node: "node2", Ready: true, Serving: true}
	// e1 draining: serving and terminating, used on node1 only while node1 has nothing ready.
	e1d = svcmodel.Endpoint{IP: netip.MustParseAddr("10.244.1.11"), Port: 8080, Node: "node1", Serving: true, Terminating: true}
	// h1, h2: host-network pods on node1 and node2, at their node's address.
	h1 = svcmodel.Endpoint{IP: netip.MustParseAddr("172.18.0.1"), Port: 10180, Node: "node1", Ready: true, Serving: true}
	h2 = svcmodel.Endpoint{IP: netip.MustParseAddr("172.18.0.2"), Port: 10180, Node: "node2", Ready: true, Serving: true}
)

// port is a config port with its endpoints, backends as buildConfig computes them.
func port(name string, proto svcmodel.Proto, number, nodePort int32, eps ...svcmodel.Endpoint) portConfig {
	return portConfig{port: svcmodel.Port{Name: name, Proto: proto, Port: number, NodePort: nodePort},
		endpoints: eps, backends: join(svcmodel.Usable(eps, svc(nil)))}
}

func conf(mod func(*config)) config {
	c := config{svc: svc(nil), key: "ns/web", clusterIPs: []netip.Addr{cip}, options: map[string]string{},
		ports: []portConfig{port("http", svcmodel.TCP, 80, 0, e1, e2)}}
	if mod != nil {
		mod(&c)
	}
	return c
}

// flat is lbs by "role scope".
func flat(lbs lbSet) map[string]lb {
	out := map[string]lb{}
	for id, l := range lbs {
		out[string(id.Role)+" "+id.Scope] = *l
	}
	return out
}

func clusterOpts(extra ...string) map[string]string {
	o := map[string]string{"reject": "true", "event": "false"}
	for i := 0; i+1 < len(extra); i += 2 {
		o[extra[i]] = extra[i+1]
	}
	return o
}

func TestBuildConfig(t *testing.T) {
	slices := []*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080,
		ep{ip: "10.244.1.10", node: "node1"}, ep{ip: "10.244.2.10", node: "node2"})}
	for _, tc := range []struct {
		name     string
		mod      func(*corev1.Service)
		want     func(*config)
		problems []string
	}{
		{"ClusterIP", nil, nil, nil},
		{"affinity, default timeout", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP },
			func(c *config) { c.options["affinity_timeout"] = "10800" }, nil},
		{"policies Local", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			s.Spec.Ports[0].NodePort = 30080
		}, func(c *config) {
			c.etpLocal, c.itpLocal = true, true
			c.ports[0].port.NodePort = 30080
		}, nil},
		{"problems in Event order: cluster IPs, external IPs, ports", func(s *corev1.Service) {
			s.Spec.Ports = append([]corev1.ServicePort{{Name: "weird", Protocol: "ICMP", Port: 1}}, s.Spec.Ports...)
			s.Spec.ExternalIPs = []string{"192.0.2.10", "bogus"}
			s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"}
		}, func(c *config) { c.external = []netip.Addr{eip} },
			[]string{ReasonUnsupportedIPFamily, ReasonInvalidIP, ReasonUnsupportedProtocol}},
	} {
		s := svc(tc.mod)
		want := conf(tc.want)
		want.svc = s
		got, problems := buildConfig(s, slices, allowAll)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, want)
		}
		var reasons []string
		for _, p := range problems {
			reasons = append(reasons, p.Reason)
		}
		if !reflect.DeepEqual(reasons, tc.problems) {
			t.Errorf("%s: problems %v", tc.name, problems)
		}
	}
}

func TestClusterLBs(t *testing.T) {
	b := "10.244.1.10:8080,10.244.2.10:8080"
	for _, tc := range []struct {
		name string
		mod  func(*config)
		want map[string]lb
	}{
		{"ClusterIP", nil, map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
			vips: map[string]string{"10.96.0.10:80": b}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
		{"two protocols, affinity, external IPs", func(c *config) {
			c.options["affinity_timeout"] = "5"
			c.external = []netip.Addr{eip}
			c.ports = append(c.ports, port("dns", svcmodel.UDP, 53, 0, e1))
		}, map[string]lb{
			"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{"10.96.0.10:80": b, "192.0.2.10:80": b}, opts: clusterOpts("affinity_timeout", "5"), refs: []nb.ID{lbGroup}},
			"lb-cluster udp": {name: "Service_ns/web_UDP_cluster", proto: svcmodel.UDP,
				vips: map[string]string{"10.96.0.10:53": "10.244.1.10:8080", "192.0.2.10:53": "10.244.1.10:8080"},
				opts: clusterOpts("affinity_timeout", "5"), refs: []nb.ID{lbGroup}},
		}},
		{"ETP Local: external IPs go to the gateway routers", func(c *config) { c.external, c.etpLocal = []netip.Addr{eip}, true },
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{"10.96.0.10:80": b}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
		{"ITP Local: ClusterIPs go to the switches, the (empty) LB stays for NodePorts", func(c *config) { c.itpLocal = true },
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
		{"host-network endpoints: ClusterIPs go to the switches, external IPs to the routers", func(c *config) {
			c.hostEndpoints, c.external = true, []netip.Addr{eip}
		},
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
	} {
		if got := flat(clusterLBs(conf(tc.mod))); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestAddNodePortVIPs(t *testing.T) {
	b := "10.244.1.10:8080,10.244.2.10:8080"
	template := clusterOpts("template", "true", "address-family", "ipv4")
	for _, tc := range []struct {
		name string
		mod  func(*config)
		want map[string]lb
	}{
		{"no node port: unchanged", nil, map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
			vips: map[string]string{"10.96.0.10:80": b}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
		{"template for the switches, the gateway address for the routers", func(c *config) { c.ports[0].port.NodePort = 30080 },
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{"10.96.0.10:80": b, "^NODEIP:30080": b, "169.254.100.1:30080": b}, opts: template, refs: []nb.ID{lbGroup}}}},
		{"ITP Local still has its NodePorts in the cluster LB", func(c *config) { c.ports[0].port.NodePort, c.itpLocal = 30080, true },
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{"^NODEIP:30080": b, "169.254.100.1:30080": b}, opts: template, refs: []nb.ID{lbGroup}}}},
		{"session affinity: a VIP per node IP, no template (ovn-controller cannot parse one)", func(c *config) {
			c.ports[0].port.NodePort, c.options["affinity_timeout"] = 30080, "10800"
		}, map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
			vips: map[string]string{"10.96.0.10:80": b, "172.18.0.1:30080": b, "172.18.0.2:30080": b, "169.254.100.1:30080": b},
			opts: clusterOpts("affinity_timeout", "10800"), refs: []nb.ID{lbGroup}}}},
		{"host-network endpoints: the template only, the gateway address goes to the routers' own LBs", func(c *config) {
			c.ports[0].port.NodePort, c.hostEndpoints = 30080, true
		}, map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
			vips: map[string]string{"^NODEIP:30080": b}, opts: template, refs: []nb.ID{lbGroup}}}},
		{"ETP Local: none", func(c *config) { c.ports[0].port.NodePort, c.etpLocal = 30080, true },
			map[string]lb{"lb-cluster tcp": {name: "Service_ns/web_TCP_cluster", proto: svcmodel.TCP,
				vips: map[string]string{"10.96.0.10:80": b}, opts: clusterOpts(), refs: []nb.ID{lbGroup}}}},
	} {
		c := conf(tc.mod)
		lbs := clusterLBs(c)
		addNodePortVIPs(c, lbs, append(nodes, Node{Name: "node3", HasSwitch: true}))
		if got := flat(lbs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestNodeRouterLBs(t *testing.T) {
	gr := func(n string) []nb.ID { return []nb.ID{nb.NewID(nb.Node, n, nb.GatewayRouter)} }
	skip := map[string]string{"skip_snat": "true"}
	withNodes := append(nodes, Node{Name: "node3", HasSwitch: true}) // no IP yet: no gateway router
	for _, tc := range []struct {
		name string
		mod  func(*config)
		want map[string]lb
	}{
		{"ETP Cluster: none", func(c *config) { c.ports[0].port.NodePort = 30080 }, map[string]lb{}},
		{"NodePort and external IP, each node its own endpoints", func(c *config) {
			c.etpLocal, c.external = true, []netip.Addr{eip}
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e1, e2)
		}, map[string]lb{
			"lb-node-router tcp/node1": {name: "Service_ns/web_TCP_node_router_node1", proto: svcmodel.TCP, opts: skip, refs: gr("node1"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.1.10:8080", "172.18.0.1:30080": "10.244.1.10:8080", "192.0.2.10:80": "10.244.1.10:8080"}},
			"lb-node-router tcp/node2": {name: "Service_ns/web_TCP_node_router_node2", proto: svcmodel.TCP, opts: skip, refs: gr("node2"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.2.10:8080", "172.18.0.2:30080": "10.244.2.10:8080", "192.0.2.10:80": "10.244.2.10:8080"}},
		}},
		{"node1 drains while node2 is ready; affinity kept", func(c *config) {
			c.etpLocal, c.options["affinity_timeout"] = true, "5"
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e1d, e2)
		}, map[string]lb{
			"lb-node-router tcp/node1": {name: "Service_ns/web_TCP_node_router_node1", proto: svcmodel.TCP, refs: gr("node1"),
				opts: map[string]string{"skip_snat": "true", "affinity_timeout": "5"},
				vips: map[string]string{"169.254.100.1:30080": "10.244.1.11:8080", "172.18.0.1:30080": "10.244.1.11:8080"}},
			"lb-node-router tcp/node2": {name: "Service_ns/web_TCP_node_router_node2", proto: svcmodel.TCP, refs: gr("node2"),
				opts: map[string]string{"skip_snat": "true", "affinity_timeout": "5"},
				vips: map[string]string{"169.254.100.1:30080": "10.244.2.10:8080", "172.18.0.2:30080": "10.244.2.10:8080"}},
		}},
		// Upstream "Networking Granular Checks: Services should function for service
		// endpoints using hostNetwork", pod to nodeIP:nodePort: a gateway router owns its
		// node's address and cannot forward to it; its own host is its management address.
		{"host-network endpoints: each router every endpoint, its own node's as its management address", func(c *config) {
			c.hostEndpoints, c.external = true, []netip.Addr{eip}
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e1, h1, h2)
		}, map[string]lb{
			"lb-node-router tcp/node1": {name: "Service_ns/web_TCP_node_router_node1", proto: svcmodel.TCP, opts: map[string]string{}, refs: gr("node1"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.1.10:8080,10.244.1.2:10180,172.18.0.2:10180",
					"192.0.2.10:80": "10.244.1.10:8080,10.244.1.2:10180,172.18.0.2:10180"}},
			"lb-node-router tcp/node2": {name: "Service_ns/web_TCP_node_router_node2", proto: svcmodel.TCP, opts: map[string]string{}, refs: gr("node2"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.1.10:8080,10.244.2.2:10180,172.18.0.1:10180",
					"192.0.2.10:80": "10.244.1.10:8080,10.244.2.2:10180,172.18.0.1:10180"}},
		}},
		{"host-network endpoints without a NodePort or external IP: none", func(c *config) {
			c.hostEndpoints = true
			c.ports[0] = port("http", svcmodel.TCP, 80, 0, h1, h2)
		}, map[string]lb{}},
		// The host would answer the client directly, past the router that must undo the
		// DNAT: its node's router SNATs (the client's address is lost there).
		{"ETP Local with a host-network endpoint: no skip_snat on its node", func(c *config) {
			c.etpLocal, c.hostEndpoints = true, true
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, h1, e2)
		}, map[string]lb{
			"lb-node-router tcp/node1": {name: "Service_ns/web_TCP_node_router_node1", proto: svcmodel.TCP, opts: map[string]string{}, refs: gr("node1"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.1.2:10180", "172.18.0.1:30080": "10.244.1.2:10180"}},
			"lb-node-router tcp/node2": {name: "Service_ns/web_TCP_node_router_node2", proto: svcmodel.TCP, opts: skip, refs: gr("node2"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.2.10:8080", "172.18.0.2:30080": "10.244.2.10:8080"}},
		}},
		{"no local endpoints: the VIP without backends", func(c *config) {
			c.etpLocal = true
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e2)
		}, map[string]lb{
			"lb-node-router tcp/node1": {name: "Service_ns/web_TCP_node_router_node1", proto: svcmodel.TCP, opts: skip, refs: gr("node1"),
				vips: map[string]string{"169.254.100.1:30080": "", "172.18.0.1:30080": ""}},
			"lb-node-router tcp/node2": {name: "Service_ns/web_TCP_node_router_node2", proto: svcmodel.TCP, opts: skip, refs: gr("node2"),
				vips: map[string]string{"169.254.100.1:30080": "10.244.2.10:8080", "172.18.0.2:30080": "10.244.2.10:8080"}},
		}},
	} {
		if got := flat(nodeRouterLBs(conf(tc.mod), withNodes)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestNodeSwitchLBs(t *testing.T) {
	ls := func(n string) []nb.ID { return []nb.ID{nb.NewID(nb.Node, n, nb.NodeSwitch)} }
	// node3: no switch; node4: a switch, no IP yet.
	withNodes := []Node{nodes[0], nodes[1], {Name: "node3", IP: netip.MustParseAddr("172.18.0.3")}, {Name: "node4", HasSwitch: true}}
	for _, tc := range []struct {
		name string
		mod  func(*config)
		want map[string]lb
	}{
		{"ITP Cluster: none", nil, map[string]lb{}},
		{"each node switch its own endpoints", func(c *config) {
			c.itpLocal = true
			c.ports[0] = port("http", svcmodel.TCP, 80, 0, e1d, e2)
		}, map[string]lb{
			"lb-node-switch tcp/node1": {name: "Service_ns/web_TCP_node_switch_node1", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node1"), vips: map[string]string{"10.96.0.10:80": "10.244.1.11:8080"}},
			"lb-node-switch tcp/node2": {name: "Service_ns/web_TCP_node_switch_node2", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node2"), vips: map[string]string{"10.96.0.10:80": "10.244.2.10:8080"}},
			"lb-node-switch tcp/node4": {name: "Service_ns/web_TCP_node_switch_node4", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node4"), vips: map[string]string{"10.96.0.10:80": ""}},
		}},
		// A pod reaching its own node's IP is rerouted to the management port by the
		// cluster router, past the gateway router's VIP: the switch balances it first.
		{"ETP Local: the node's own NodePort, to its own endpoints", func(c *config) {
			c.etpLocal, c.external = true, []netip.Addr{eip}
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e1d, e2)
		}, map[string]lb{
			"lb-node-switch tcp/node1": {name: "Service_ns/web_TCP_node_switch_node1", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node1"), vips: map[string]string{"172.18.0.1:30080": "10.244.1.11:8080"}},
			"lb-node-switch tcp/node2": {name: "Service_ns/web_TCP_node_switch_node2", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node2"), vips: map[string]string{"172.18.0.2:30080": "10.244.2.10:8080"}},
		}},
		{"ETP Local without a NodePort: none", func(c *config) { c.etpLocal = true }, map[string]lb{}},
		// The host reaches a ClusterIP through its management port; balanced to its own
		// address, the packet would come back to it from itself (upstream "Networking
		// Granular Checks: Services should function for service endpoints using
		// hostNetwork", node to ClusterIP). Its own address becomes its management
		// address on its own switch only: a hairpin, which OVN SNATs to the VIP.
		{"host-network endpoints: every switch every endpoint, its own node's as its management address", func(c *config) {
			c.hostEndpoints = true
			c.ports[0] = port("http", svcmodel.TCP, 80, 0, e1, h1, h2)
		}, map[string]lb{
			"lb-node-switch tcp/node1": {name: "Service_ns/web_TCP_node_switch_node1", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node1"), vips: map[string]string{"10.96.0.10:80": "10.244.1.10:8080,10.244.1.2:10180,172.18.0.2:10180"}},
			"lb-node-switch tcp/node2": {name: "Service_ns/web_TCP_node_switch_node2", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node2"), vips: map[string]string{"10.96.0.10:80": "10.244.1.10:8080,10.244.2.2:10180,172.18.0.1:10180"}},
			"lb-node-switch tcp/node4": {name: "Service_ns/web_TCP_node_switch_node4", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node4"), vips: map[string]string{"10.96.0.10:80": "10.244.1.10:8080,172.18.0.1:10180,172.18.0.2:10180"}},
		}},
		// Upstream "should respect internalTrafficPolicy=Local Pod and Node, to Pod
		// (hostNetwork: true)": node1's host reaches its own host-network endpoint.
		{"ITP Local, a host-network endpoint: its node's switch writes it as the management address", func(c *config) {
			c.itpLocal, c.hostEndpoints = true, true
			c.ports[0] = port("http", svcmodel.TCP, 80, 0, h1)
		}, map[string]lb{
			"lb-node-switch tcp/node1": {name: "Service_ns/web_TCP_node_switch_node1", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node1"), vips: map[string]string{"10.96.0.10:80": "10.244.1.2:10180"}},
			"lb-node-switch tcp/node2": {name: "Service_ns/web_TCP_node_switch_node2", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node2"), vips: map[string]string{"10.96.0.10:80": ""}},
			"lb-node-switch tcp/node4": {name: "Service_ns/web_TCP_node_switch_node4", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node4"), vips: map[string]string{"10.96.0.10:80": ""}},
		}},
		{"ITP and ETP Local: one load balancer per node switch", func(c *config) {
			c.itpLocal, c.etpLocal = true, true
			c.ports[0] = port("http", svcmodel.TCP, 80, 30080, e1, e2)
		}, map[string]lb{
			"lb-node-switch tcp/node1": {name: "Service_ns/web_TCP_node_switch_node1", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node1"), vips: map[string]string{"10.96.0.10:80": "10.244.1.10:8080", "172.18.0.1:30080": "10.244.1.10:8080"}},
			"lb-node-switch tcp/node2": {name: "Service_ns/web_TCP_node_switch_node2", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node2"), vips: map[string]string{"10.96.0.10:80": "10.244.2.10:8080", "172.18.0.2:30080": "10.244.2.10:8080"}},
			"lb-node-switch tcp/node4": {name: "Service_ns/web_TCP_node_switch_node4", proto: svcmodel.TCP, opts: map[string]string{},
				refs: ls("node4"), vips: map[string]string{"10.96.0.10:80": ""}},
		}},
	} {
		if got := flat(nodeSwitchLBs(conf(tc.mod), withNodes)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestHasLocalPolicyAffinityNodePort: a NodePort Service with ClientIP affinity has a VIP
// per node IP, so its rows depend on the nodes; without affinity or without a NodePort they
// do not.
func TestHasLocalPolicyAffinityNodePort(t *testing.T) {
	mk := func(affinity corev1.ServiceAffinity, nodePort int32) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: affinity,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: nodePort}}}}
	}
	for _, tc := range []struct {
		svc  *corev1.Service
		want bool
	}{
		{mk(corev1.ServiceAffinityClientIP, 30080), true},
		{mk(corev1.ServiceAffinityClientIP, 0), false},
		{mk(corev1.ServiceAffinityNone, 30080), false},
	} {
		if got := HasLocalPolicy(tc.svc); got != tc.want {
			t.Errorf("affinity %s, nodePort %d: HasLocalPolicy %v, want %v", tc.svc.Spec.SessionAffinity, tc.svc.Spec.Ports[0].NodePort, got, tc.want)
		}
	}
}

// TestHasHostEndpoints: an endpoint at the address of a node with a switch, ready or not,
// moves the Service's ClusterIPs to the node switches; a pod address, or an address no node
// with a switch and a management address has, does not.
func TestHasHostEndpoints(t *testing.T) {
	h1NotReady := h1
	h1NotReady.Ready, h1NotReady.Serving = false, false
	noMgmt := []Node{{Name: "node1", IP: h1.IP, HasSwitch: true}}
	for _, tc := range []struct {
		name  string
		eps   []svcmodel.Endpoint
		nodes []Node
		want  bool
	}{
		{"pods only", []svcmodel.Endpoint{e1, e2}, nodes, false},
		{"a host-network endpoint", []svcmodel.Endpoint{e1, h2}, nodes, true},
		{"not ready still counts", []svcmodel.Endpoint{h1NotReady}, nodes, true},
		{"no node has that address", []svcmodel.Endpoint{h1}, nodes[1:], false},
		{"the node has no management address yet", []svcmodel.Endpoint{h1}, noMgmt, false},
	} {
		c := conf(func(c *config) { c.ports[0] = port("http", svcmodel.TCP, 80, 0, tc.eps...) })
		if got := hasHostEndpoints(c, tc.nodes); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
