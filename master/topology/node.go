package topology

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Node is what a node's rows depend on.
type Node struct {
	Name   string
	Subnet netip.Prefix // the node's pod subnet
	// Gateway is nil until the node agent has published its chassis: without a chassis to
	// bind it to, a gateway router would have nowhere to run.
	Gateway *Gateway
}

// Gateway is what the node's gateway router needs.
type Gateway struct {
	ChassisID string
	NodeIP    netip.Prefix // the node's address on the physical network, with its prefix
	MAC       string       // the gateway bridge's MAC, shared by the GR's external port
	NextHop   netip.Addr   // the physical network's default gateway; zero if none
	JoinIP    netip.Addr   // the GR's address on the join subnet
}

// GatewayFrom reads a node agent's chassis annotation; joinIP is the GR's join address.
func GatewayFrom(info contract.NodeChassisInfo, joinIP netip.Addr) (*Gateway, error) {
	if err := info.Validate(); err != nil {
		return nil, err
	}
	ip, _ := netip.ParsePrefix(info.NodeIP) // Validate parsed it
	if !ip.Addr().Is4() {
		return nil, fmt.Errorf("%s: nodeIP %s: only IPv4 is supported", contract.NodeChassisKey, ip)
	}
	hw, _ := net.ParseMAC(info.GatewayMAC)
	gw := &Gateway{ChassisID: info.ChassisID, NodeIP: ip, MAC: hw.String(), JoinIP: joinIP}
	if info.NextHop != "" {
		gw.NextHop, _ = netip.ParseAddr(info.NextHop)
		if !gw.NextHop.Is4() {
			return nil, fmt.Errorf("%s: nextHop %s: only IPv4 is supported", contract.NodeChassisKey, gw.NextHop)
		}
	}
	return gw, nil
}

// managementPortSecurity is what the node may send into the pod network through its
// management port: its management address, and once it has a gateway its own node address,
// the source of its answers to its pods' connections to that address (NodeHostReroute).
func managementPortSecurity(n Node) string {
	mgmt := contract.ManagementIP(n.Subnet)
	ps := mac(mgmt) + " " + mgmt.String()
	if n.Gateway != nil && n.Gateway.NodeIP.Addr().Is4() {
		ps += " " + n.Gateway.NodeIP.Addr().String()
	}
	return ps
}

// NodeRows returns the rows of node n: its switch, its link to the cluster router, its
// management port and, once the node has a chassis, its gateway router with its join and
// external links, routes and SNAT.
func NodeRows(cfg Config, n Node) ([]nb.Row, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if !n.Subnet.Addr().Is4() || n.Subnet.Masked() != n.Subnet || n.Subnet.Bits() > 29 || !cfg.ClusterCIDR.Contains(n.Subnet.Addr()) {
		return nil, fmt.Errorf("topology: node %s: subnet %s is not an IPv4 /29-or-larger subnet of %s", n.Name, n.Subnet, cfg.ClusterCIDR)
	}
	id := func(r nb.Role) nb.ID { return nb.NewID(nb.Node, n.Name, r) }
	clusterRouter := nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterRouter)
	gw, mgmt := contract.RouterIP(n.Subnet), contract.ManagementIP(n.Subnet)
	rtos := contract.NodeRouterPort(n.Name)
	rows := []nb.Row{
		{ID: id(nb.NodeSwitch), Model: &nbdb.LogicalSwitch{Name: contract.NodeSwitch(n.Name), OtherConfig: map[string]string{"subnet": n.Subnet.String()}}},
		{
			ID:     id(nb.NodeRouterPort),
			Model:  &nbdb.LogicalRouterPort{Name: rtos, MAC: mac(gw), Networks: []string{prefix(gw, n.Subnet)}},
			Parent: clusterRouter,
		},
		{ID: id(nb.NodeSwitchRouterPort), Model: routerTypePort(contract.NodeSwitchRouterPort(n.Name), rtos, "router", nil), Parent: id(nb.NodeSwitch)},
		{
			ID: id(nb.ManagementPort),
			// Port security: the node sends into the pod network only from its own
			// address. A node routes (ip_forward), so without it any host that can reach
			// the node could inject packets with a forged pod or node source.
			Model: &nbdb.LogicalSwitchPort{Name: contract.ManagementPort(n.Name), Addresses: []string{mac(mgmt) + " " + mgmt.String()},
				PortSecurity: []string{managementPortSecurity(n)}},
			Parent: id(nb.NodeSwitch),
		},
	}
	if n.Gateway == nil {
		return rows, nil
	}
	gwRows, err := gatewayRows(cfg, n)
	if err != nil {
		return nil, err
	}
	return append(rows, gwRows...), nil
}
