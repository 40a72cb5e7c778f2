package topology

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

var cfg = Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), JoinSubnet: netip.MustParsePrefix("100.64.0.0/16")}

func byRole(t *testing.T, rows []nb.Row) map[nb.Role]nb.Row {
	t.Helper()
	out := map[nb.Role]nb.Row{}
	for _, r := range rows {
		if err := r.ID.Validate(); err != nil {
			t.Error(err)
		}
		if _, dup := out[r.ID.Role]; dup {
			t.Errorf("role %s twice", r.ID.Role)
		}
		out[r.ID.Role] = r
	}
	return out
}

func gateway(t *testing.T, nextHop string) *Gateway {
	t.Helper()
	gw, err := GatewayFrom(contract.NodeChassisInfo{
		ChassisID: "chassis-1", NodeIP: "172.18.0.1/24", GatewayMAC: "0A:58:AC:12:00:01", NextHop: nextHop,
	}, netip.MustParseAddr("100.64.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

func TestClusterRows(t *testing.T) {
	rows := byRole(t, Cluster(cfg))
	if lr := rows[nb.ClusterRouter].Model.(*nbdb.LogicalRouter); lr.Name != "ovn_cluster_router" {
		t.Errorf("cluster router %+v", lr)
	}
	lrp := rows[nb.ClusterRouterJoinPort].Model.(*nbdb.LogicalRouterPort)
	if lrp.Name != "rtoj-ovn_cluster_router" || lrp.MAC != "0a:58:64:40:00:01" || !reflect.DeepEqual(lrp.Networks, []string{"100.64.0.1/16"}) {
		t.Errorf("join port %+v", lrp)
	}
	lsp := rows[nb.JoinSwitchToClusterPort].Model.(*nbdb.LogicalSwitchPort)
	if lsp.Type != "router" || lsp.Options["router-port"] != lrp.Name || !reflect.DeepEqual(lsp.Addresses, []string{"router"}) {
		t.Errorf("join switch port %+v", lsp)
	}
}

func TestNodeWithoutChassisHasNoGateway(t *testing.T) {
	rows, err := NodeRows(cfg, Node{Name: "node1", Subnet: netip.MustParsePrefix("10.244.1.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	got := byRole(t, rows)
	if len(got) != 4 {
		t.Errorf("%d rows, want switch, rtos, stor, management port", len(got))
	}
	ls := got[nb.NodeSwitch].Model.(*nbdb.LogicalSwitch)
	if ls.Name != "node1" || ls.OtherConfig["subnet"] != "10.244.1.0/24" {
		t.Errorf("switch %+v", ls)
	}
	rtos := got[nb.NodeRouterPort]
	if lrp := rtos.Model.(*nbdb.LogicalRouterPort); lrp.Name != "rtos-node1" || lrp.MAC != "0a:58:0a:f4:01:01" ||
		!reflect.DeepEqual(lrp.Networks, []string{"10.244.1.1/24"}) || rtos.Parent.Role != nb.ClusterRouter {
		t.Errorf("rtos %+v parent %s", lrp, rtos.Parent)
	}
	if mgmt := got[nb.ManagementPort].Model.(*nbdb.LogicalSwitchPort); mgmt.Name != "k8s-node1" ||
		!reflect.DeepEqual(mgmt.Addresses, []string{"0a:58:0a:f4:01:02 10.244.1.2"}) ||
		!reflect.DeepEqual(mgmt.PortSecurity, []string{"0a:58:0a:f4:01:02 10.244.1.2"}) {
		t.Errorf("management port %+v", mgmt)
	}
}

func TestNodeGateway(t *testing.T) {
	rows, err := NodeRows(cfg, Node{Name: "node1", Subnet: netip.MustParsePrefix("10.244.1.0/24"), Gateway: gateway(t, "172.18.0.254")})
	if err != nil {
		t.Fatal(err)
	}
	got := byRole(t, rows)
	gr := got[nb.GatewayRouter].Model.(*nbdb.LogicalRouter)
	want := map[string]string{"chassis": "chassis-1", "lb_force_snat_ip": "router_ip",
		"always_learn_from_arp_request": "false", "dynamic_neigh_routers": "true"}
	if gr.Name != "GR_node1" || !reflect.DeepEqual(gr.Options, want) {
		t.Errorf("GR %+v", gr)
	}
	rtoe := got[nb.GatewayExternalPort].Model.(*nbdb.LogicalRouterPort)
	if rtoe.Name != "rtoe-GR_node1" || rtoe.MAC != "0a:58:ac:12:00:01" || !reflect.DeepEqual(rtoe.Networks, []string{"172.18.0.1/24"}) {
		t.Errorf("rtoe %+v", rtoe)
	}
	// M8: the node's pods reach its own address through the management port, which may
	// answer from it; so do answers to the host's short-circuited connections.
	if p := got[nb.NodeHostReroute].Model.(*nbdb.LogicalRouterPolicy); p.Match != "ip4.dst == 172.18.0.1 && (ip4.src == 10.244.1.0/24 || tcp.dst >= 64512 || udp.dst >= 64512)" ||
		p.Action != nbdb.LogicalRouterPolicyActionReroute || !reflect.DeepEqual(p.Nexthops, []string{"10.244.1.2"}) ||
		got[nb.NodeHostReroute].Parent.Role != nb.ClusterRouter {
		t.Errorf("own-node reroute %+v", p)
	}
	if mgmt := got[nb.ManagementPort].Model.(*nbdb.LogicalSwitchPort); !reflect.DeepEqual(mgmt.PortSecurity, []string{"0a:58:0a:f4:01:02 10.244.1.2 172.18.0.1"}) {
		t.Errorf("management port security %q", mgmt.PortSecurity)
	}
	etor := got[nb.ExternalSwitchGWPort].Model.(*nbdb.LogicalSwitchPort)
	if etor.Options["nat-addresses"] != "router" || etor.Options["exclude-lb-vips-from-garp"] != "true" || etor.Options["router-port"] != "rtoe-GR_node1" ||
		!reflect.DeepEqual(etor.Addresses, []string{"0a:58:ac:12:00:01"}) {
		t.Errorf("etor %+v", etor)
	}
	ln := got[nb.LocalnetPort]
	if p := ln.Model.(*nbdb.LogicalSwitchPort); p.Name != "breth0_node1" || p.Type != "localnet" ||
		p.Options["network_name"] != "physnet" || ln.Parent.Role != nb.ExternalSwitch {
		t.Errorf("localnet %+v", p)
	}
	if jtor := got[nb.JoinSwitchGatewayPort]; jtor.Parent != nb.NewID(nb.Cluster, nb.ClusterName, nb.JoinSwitch) {
		t.Errorf("jtor-GR_node1 parent %s", jtor.Parent)
	}
	for _, tc := range []struct {
		role                     nb.Role
		prefix, nexthop, policy  string
		outputPort, parentRouter string
	}{
		{nb.NodeSubnetRoute, "10.244.1.0/24", "100.64.0.2", "src-ip", "", "cluster-router"},
		{nb.GatewayJoinIPRoute, "100.64.0.2/32", "100.64.0.2", "", "", "cluster-router"},
		{nb.GatewayClusterRoute, "10.244.0.0/16", "100.64.0.1", "", "", "gateway-router"},
		{nb.GatewayDefaultRoute, "0.0.0.0/0", "172.18.0.254", "", "rtoe-GR_node1", "gateway-router"},
	} {
		r := got[tc.role]
		route := r.Model.(*nbdb.LogicalRouterStaticRoute)
		if route.IPPrefix != tc.prefix || route.Nexthop != tc.nexthop || deref(route.Policy) != tc.policy ||
			deref(route.OutputPort) != tc.outputPort || string(r.Parent.Role) != tc.parentRouter {
			t.Errorf("%s: %+v (policy %q, port %q) on %s", tc.role, route, deref(route.Policy), deref(route.OutputPort), r.Parent)
		}
	}
	nat := got[nb.GatewaySNAT].Model.(*nbdb.NAT)
	if nat.Type != "snat" || nat.ExternalIP != "172.18.0.1" || nat.LogicalIP != "10.244.0.0/16" {
		t.Errorf("SNAT %+v", nat)
	}

	// Without a next hop there is no default route, and nothing else changes.
	rows, err = NodeRows(cfg, Node{Name: "node1", Subnet: netip.MustParsePrefix("10.244.1.0/24"), Gateway: gateway(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	if noDefault := byRole(t, rows); len(noDefault) != len(got)-1 || noDefault[nb.GatewayDefaultRoute].Model != nil {
		t.Errorf("without a next hop: %d rows (with one: %d)", len(noDefault), len(got))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestNodeRowsRejects(t *testing.T) {
	bad := []Node{
		{Name: "n", Subnet: netip.MustParsePrefix("10.245.1.0/24")},  // outside the cluster CIDR
		{Name: "n", Subnet: netip.MustParsePrefix("10.244.1.0/30")},  // no room for pods
		{Name: "n", Subnet: netip.MustParsePrefix("10.244.1.16/24")}, // not canonical
	}
	gw := gateway(t, "")
	gw.JoinIP = netip.MustParseAddr("100.64.0.1") // the cluster router's
	bad = append(bad, Node{Name: "n", Subnet: netip.MustParsePrefix("10.244.1.0/24"), Gateway: gw})
	for _, n := range bad {
		if _, err := NodeRows(cfg, n); err == nil {
			t.Errorf("accepted %+v", n)
		}
	}
	if _, err := GatewayFrom(contract.NodeChassisInfo{ChassisID: "c", NodeIP: "fd00::1/64", GatewayMAC: "0a:58:00:00:00:01"},
		netip.MustParseAddr("100.64.0.2")); err == nil {
		t.Error("an IPv6 node IP was accepted")
	}
}

func TestPodRowsAndAnnotation(t *testing.T) {
	subnet := netip.MustParsePrefix("10.244.2.0/24")
	info := PodNetwork(subnet, netip.MustParseAddr("10.244.2.5"))
	if _, err := info.Marshal(); err != nil {
		t.Fatalf("the annotation does not pass the contract's validation: %v", err)
	}
	if info.MACAddress != "0a:58:0a:f4:02:05" || info.GatewayIPs[0] != "10.244.2.1" || info.IPAddresses[0] != "10.244.2.5/24" {
		t.Errorf("annotation %+v", info)
	}
	rows, err := PodRows(Pod{Namespace: "ns", Name: "web", UID: "u1", Node: "node2", IP: netip.MustParseAddr("10.244.2.5")})
	if err != nil {
		t.Fatal(err)
	}
	r := byRole(t, rows)[nb.PodPort]
	lsp := r.Model.(*nbdb.LogicalSwitchPort)
	want := []string{"0a:58:0a:f4:02:05 10.244.2.5"}
	if lsp.Name != "ns_web" || !reflect.DeepEqual(lsp.Addresses, want) || !reflect.DeepEqual(lsp.PortSecurity, want) ||
		lsp.ExternalIDs[contract.PodUIDKey] != "u1" || r.ID.Name != "ns/web" || r.Parent != nb.NewID(nb.Node, "node2", nb.NodeSwitch) {
		t.Errorf("pod port %+v, id %s, parent %s", lsp, r.ID, r.Parent)
	}
	// Bound only on its own node's chassis, and only to the interface of this incarnation.
	if want := map[string]string{"requested-chassis": "node2", "iface-id-ver": "u1"}; !reflect.DeepEqual(lsp.Options, want) {
		t.Errorf("pod port options %v, want %v", lsp.Options, want)
	}
	if _, err := PodRows(Pod{Namespace: "ns", Name: "web", IP: netip.MustParseAddr("10.244.2.5")}); err == nil {
		t.Error("a pod without node and UID was accepted")
	}
}
