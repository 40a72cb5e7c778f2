// Package topology says which Northbound rows the cluster, a node and a pod need. Its
// functions are pure: Kubernetes-derived values in, nb rows out, no I/O. The layout is the
// shared-gateway topology of ../../docs/architecture.md (whose naming table a test holds to
// these functions). The rows' names, and the addresses of a node subnet the node agent relies
// on, are spelled in internal/contract (names.go, addressing.go), as operators of OVN-based
// Kubernetes networks expect them:
//
//	ovn_cluster_router ── rtos-<node> ── stor-<node> ── switch <node> ── k8s-<node>, pods
//	        └─ rtoj-ovn_cluster_router ── join ── jtor-GR_<node> ── rtoj-GR_<node> ── GR_<node>
//	GR_<node> ── rtoe-GR_<node> ── etor-GR_<node> ── ext_<node> ── breth0_<node> (localnet)
package topology

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Config is what the topology takes from the master's configuration.
type Config struct {
	ClusterCIDR netip.Prefix
	JoinSubnet  netip.Prefix
	// ServiceCIDRs are the Service ranges: like the two above, no node address lies in
	// them (CheckNodeIP).
	ServiceCIDRs []netip.Prefix
}

// ClusterRouterJoinIP is the cluster router's address on the join subnet (the first host
// address); every gateway router routes the cluster CIDR back to it.
func (c Config) ClusterRouterJoinIP() netip.Addr { return nth(c.JoinSubnet, 1) }

// nth returns the n-th address of IPv4 prefix p (0 is the network address).
func nth(p netip.Prefix, n uint32) netip.Addr {
	b := p.Masked().Addr().As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(b[:])+n)
	return netip.AddrFrom4(out)
}

// mac is the MAC the project gives an interface or port with address ip.
func mac(ip netip.Addr) string { return contract.MACFromIP(ip).String() }

// Cluster returns the rows every node shares: the cluster router and the join switch with
// the cluster router's port on it.
func Cluster(cfg Config) []nb.Row {
	id := func(r nb.Role) nb.ID { return nb.NewID(nb.Cluster, nb.ClusterName, r) }
	joinIP := cfg.ClusterRouterJoinIP()
	const lrp = contract.ClusterRouterJoinPort
	return []nb.Row{
		{ID: id(nb.ClusterRouter), Model: &nbdb.LogicalRouter{Name: contract.ClusterRouter}},
		{ID: id(nb.JoinSwitch), Model: &nbdb.LogicalSwitch{Name: contract.JoinSwitch}},
		{
			ID:     id(nb.ClusterRouterJoinPort),
			Model:  &nbdb.LogicalRouterPort{Name: lrp, MAC: mac(joinIP), Networks: []string{prefix(joinIP, cfg.JoinSubnet)}},
			Parent: id(nb.ClusterRouter),
		},
		{
			ID:     id(nb.JoinSwitchToClusterPort),
			Model:  routerTypePort(contract.JoinSwitchClusterPort, lrp, "router", nil),
			Parent: id(nb.JoinSwitch),
		},
	}
}

// prefix writes ip with subnet's prefix length, as OVN wants router port networks.
func prefix(ip netip.Addr, subnet netip.Prefix) string {
	return netip.PrefixFrom(ip, subnet.Bits()).String()
}

// routerTypePort is a switch port of type router, the switch side of a router port.
func routerTypePort(name, routerPort, addresses string, extraOptions map[string]string) *nbdb.LogicalSwitchPort {
	opts := map[string]string{"router-port": routerPort}
	for k, v := range extraOptions {
		opts[k] = v
	}
	return &nbdb.LogicalSwitchPort{Name: name, Type: "router", Addresses: []string{addresses}, Options: opts}
}

func checkConfig(cfg Config) error {
	for _, p := range []netip.Prefix{cfg.ClusterCIDR, cfg.JoinSubnet} {
		if !p.IsValid() || !p.Addr().Is4() || p.Masked() != p {
			return fmt.Errorf("topology: %s: want a canonical IPv4 prefix", p)
		}
	}
	return nil
}

// ClusterLBGroup is the cluster's load balancer group, which holds every Service's
// cluster-wide load balancer; referrers are the node switches and gateway routers that
// exist. One group rather than every LB on every switch and router: a new Service costs one
// reference, a new node one reference per switch or router, not one per Service.
func ClusterLBGroup(referrers []nb.ID) nb.Row {
	return nb.Row{
		ID:           nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterLBGroup),
		Model:        &nbdb.LoadBalancerGroup{Name: nb.ClusterLBGroupName},
		ReferencedBy: referrers,
	}
}
