package topology

import (
	"fmt"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// hostReroutePriority is the cluster router's policy that sends a node's pods to their own
// node's address through its management port; the router has no other policy.
const hostReroutePriority = 1000

// gatewayRows are the rows of n's gateway router GR_<node>, which shares the node's IP and
// MAC on the physical network (shared gateway).
func gatewayRows(cfg Config, n Node) ([]nb.Row, error) {
	g := n.Gateway
	if !cfg.JoinSubnet.Contains(g.JoinIP) || g.JoinIP == nth(cfg.JoinSubnet, 0) || g.JoinIP == cfg.ClusterRouterJoinIP() {
		return nil, fmt.Errorf("topology: node %s: join IP %s is not a gateway address of %s", n.Name, g.JoinIP, cfg.JoinSubnet)
	}
	if g.ChassisID == "" || !g.NodeIP.Addr().Is4() || g.MAC == "" {
		return nil, fmt.Errorf("topology: node %s: incomplete gateway %+v", n.Name, *g)
	}
	// The node address goes into the management port's port_security and the reroute
	// towards it: never one of the cluster's own (the caller checks the other nodes).
	if err := cfg.checkNodeIPRange(g.NodeIP); err != nil {
		return nil, fmt.Errorf("topology: node %s: %w", n.Name, err)
	}
	id := func(r nb.Role) nb.ID { return nb.NewID(nb.Node, n.Name, r) }
	clusterRouter := nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterRouter)
	joinSwitch := nb.NewID(nb.Cluster, nb.ClusterName, nb.JoinSwitch)
	gr := contract.GatewayRouter(n.Name)
	rtoj, rtoe := contract.GatewayJoinPort(n.Name), contract.GatewayExternalPort(n.Name)
	joinHost := netip.PrefixFrom(g.JoinIP, 32).String()
	srcIP := nbdb.LogicalRouterStaticRoutePolicySrcIP

	rows := []nb.Row{
		{ID: id(nb.GatewayRouter), Model: &nbdb.LogicalRouter{Name: gr, Options: map[string]string{
			"chassis": g.ChassisID,
			// Load-balanced traffic (NodePorts) is also SNATed to the address of the GR port
			// it leaves by (the join IP towards pods), so that a backend on any node answers
			// to this GR, which holds the connection's DNAT state.
			"lb_force_snat_ip": "router_ip",
			// Every GR shares the join switch (and its external network with other hosts).
			// Learn a MAC binding from an ARP request only when it targets this router, and
			// resolve the other routers on a switch by ARP instead of northd writing static
			// neighbour flows for every pair of routers, which grows with the square of nodes.
			"always_learn_from_arp_request": "false",
			"dynamic_neigh_routers":         "true",
		}}},
		{
			ID:     id(nb.GatewayJoinPort),
			Model:  &nbdb.LogicalRouterPort{Name: rtoj, MAC: mac(g.JoinIP), Networks: []string{prefix(g.JoinIP, cfg.JoinSubnet)}},
			Parent: id(nb.GatewayRouter),
		},
		{ID: id(nb.JoinSwitchGatewayPort), Model: routerTypePort(contract.JoinSwitchGatewayPort(n.Name), rtoj, "router", nil), Parent: joinSwitch},
		{ID: id(nb.ExternalSwitch), Model: &nbdb.LogicalSwitch{Name: contract.ExternalSwitch(n.Name)}},
		{
			ID:     id(nb.GatewayExternalPort),
			Model:  &nbdb.LogicalRouterPort{Name: rtoe, MAC: g.MAC, Networks: []string{g.NodeIP.String()}},
			Parent: id(nb.GatewayRouter),
		},
		{
			// nat-addresses=router: the switch side announces the GR's NAT addresses (the
			// node IP) with gratuitous ARP, so the physical network learns where they are.
			// Not its load balancers' VIPs: they include every node's address (NodePorts
			// with affinity), the ClusterIPs and externalIPs, and announcing them would
			// claim the other nodes' addresses on the physical network.
			ID: id(nb.ExternalSwitchGWPort),
			Model: routerTypePort(contract.ExternalSwitchGatewayPort(n.Name), rtoe, g.MAC,
				map[string]string{"nat-addresses": "router", "exclude-lb-vips-from-garp": "true"}),
			Parent: id(nb.ExternalSwitch),
		},
		{
			ID: id(nb.LocalnetPort), Parent: id(nb.ExternalSwitch),
			Model: &nbdb.LogicalSwitchPort{Name: contract.LocalnetPort(n.Name), Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": contract.PhysicalNetwork}},
		},
		{
			// Pods of this node leave the cluster through this node's GR.
			ID: id(nb.NodeSubnetRoute), Parent: clusterRouter,
			Model: &nbdb.LogicalRouterStaticRoute{IPPrefix: n.Subnet.String(), Nexthop: g.JoinIP.String(), Policy: &srcIP},
		},
		{
			// With lb_force_snat_ip=router_ip a reply from a pod goes to the GR's join IP. The
			// src-ip route of the pod's own node (prefix length 24 -> priority 72) beats the
			// connected join subnet (/16 -> 50) and would send it to the wrong GR; a /32
			// destination route per GR outranks both.
			ID: id(nb.GatewayJoinIPRoute), Parent: clusterRouter,
			Model: &nbdb.LogicalRouterStaticRoute{IPPrefix: joinHost, Nexthop: g.JoinIP.String()},
		},
		{
			ID: id(nb.GatewayClusterRoute), Parent: id(nb.GatewayRouter),
			Model: &nbdb.LogicalRouterStaticRoute{IPPrefix: cfg.ClusterCIDR.String(), Nexthop: cfg.ClusterRouterJoinIP().String()},
		},
		{
			ID: id(nb.GatewaySNAT), Parent: id(nb.GatewayRouter),
			Model: &nbdb.NAT{Type: nbdb.NATTypeSNAT, ExternalIP: g.NodeIP.Addr().String(), LogicalIP: cfg.ClusterCIDR.String()},
		},
		{
			// A pod reaching its own node's address (status.hostIP: agents on the node):
			// through this node's gateway router the packet would end there, since the router
			// owns the address too. The management port takes it to the host instead, which
			// answers from the node address through the same port (its port security
			// admits that address).
			// Also any pod's packet for the node's address at a short-circuit port: the
			// answer to the host's own connection to an externalTrafficPolicy=Local NodePort,
			// which keeps the node IP as its source (node/localnat) and was load-balanced on
			// this node's switch, where the answer must go back to be un-DNATed. Through its
			// own node's gateway router it would be SNATed and sent to the node over the
			// physical network, which knows nothing of it.
			ID: id(nb.NodeHostReroute), Parent: clusterRouter,
			Model: &nbdb.LogicalRouterPolicy{Priority: hostReroutePriority, Action: nbdb.LogicalRouterPolicyActionReroute,
				Match:    hostRerouteMatch(n.Subnet, g.NodeIP.Addr()),
				Nexthops: []string{contract.ManagementIP(n.Subnet).String()}},
		},
	}
	rows = append(rows, nb.Row{
		// NodePort VIPs are load balancer templates ("^NODEIP:30080"): ovn-controller on this
		// node's chassis reads NODEIP here, so a NodePort costs one VIP, not one per node.
		ID:    id(nb.NodeTemplateVars),
		Model: &nbdb.ChassisTemplateVar{Chassis: g.ChassisID, Variables: map[string]string{"NODEIP": g.NodeIP.Addr().String()}},
	})
	if g.NextHop.IsValid() {
		rows = append(rows, nb.Row{
			ID: id(nb.GatewayDefaultRoute), Parent: id(nb.GatewayRouter),
			Model: &nbdb.LogicalRouterStaticRoute{IPPrefix: "0.0.0.0/0", Nexthop: g.NextHop.String(), OutputPort: &rtoe},
		})
	}
	return rows, nil
}

// hostRerouteMatch is NodeHostReroute's match: the node's own pods' packets for its address,
// and every pod's for its address at a short-circuit port (contract.ShortCircuitPortMin).
func hostRerouteMatch(subnet netip.Prefix, nodeIP netip.Addr) string {
	return fmt.Sprintf("ip4.dst == %s && (ip4.src == %s || tcp.dst >= %d || udp.dst >= %d)",
		nodeIP, subnet, contract.ShortCircuitPortMin, contract.ShortCircuitPortMin)
}
