package topology

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// A node agent publishes its node's address in its chassis annotation, the one write to the
// API that a node's credentials allow on its own Node (security audit 2, finding 1). The
// master puts that address into the node's management port_security and into the cluster
// router's reroute towards the node's management port (NodeHostReroute): an address there
// that belongs to a pod, a Service, a gateway router or another node would let the node send
// as that address into the pod network and receive what others send to it. So the address
// is checked before any row carries it (CheckNodeIP), and what the master wrote last is the
// record it falls back to when a new value is refused (RememberedGateway).

// reserved are the cluster's own ranges: no node address lies in them.
func (cfg Config) reserved() []netip.Prefix {
	return append([]netip.Prefix{cfg.ClusterCIDR, cfg.JoinSubnet}, cfg.ServiceCIDRs...)
}

// checkNodeIPRange says why ip cannot be a node's address whatever the other nodes say:
// not an IPv4 host address of its own prefix, or inside one of the cluster's ranges.
func (cfg Config) checkNodeIPRange(ip netip.Prefix) error {
	a := ip.Addr()
	if !a.Is4() || !a.IsGlobalUnicast() {
		return fmt.Errorf("nodeIP %s is not an IPv4 unicast address", ip)
	}
	if ip.Bits() < 31 && (a == ip.Masked().Addr() || a == lastAddr(ip)) {
		return fmt.Errorf("nodeIP %s is not a host address of its prefix", ip)
	}
	for _, r := range cfg.reserved() {
		if r.Contains(a) {
			return fmt.Errorf("nodeIP %s is inside the cluster's own range %s", ip, r)
		}
	}
	return nil
}

// lastAddr is the last address of IPv4 prefix p (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	return nth(p, uint32(1)<<(32-p.Bits())-1)
}

// statusIPs are a node's IPv4 addresses of type t that the kubelet reports.
func statusIPs(n *corev1.Node, t corev1.NodeAddressType) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != t {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			out = append(out, ip)
		}
	}
	return out
}

// CheckNodeIP says why node may not have ip, the nodeIP of its chassis annotation, as its
// address on the physical network, or nil if it may. nodes are every Node (node among
// them or not). ip is refused when:
//   - it is not an IPv4 host address, or lies in the cluster CIDR, the join subnet or a
//     Service range (a pod's, gateway router's or Service's address);
//   - the node reports InternalIPs (the kubelet's status) and ip is none of them;
//   - another node reports ip as its InternalIP or ExternalIP;
//   - node has no InternalIP and another node without one claims ip in its annotation too
//     (a node with InternalIPs can only claim one of those): neither gets an address two
//     claim, and one that had it keeps it (CheckKeptNodeIP).
//
// The kubelet runs with the node's credentials too, so the InternalIP check only catches an
// agent that disagrees with its kubelet; the ranges and the other nodes are what keep a
// compromised node from taking an address that is not its own.
func (cfg Config) CheckNodeIP(node *corev1.Node, ip netip.Prefix, nodes []*corev1.Node) error {
	if err := cfg.checkOwnIP(node, ip); err != nil {
		return err
	}
	return checkOthers(node, ip, nodes, true)
}

// CheckKeptNodeIP is CheckNodeIP for the address the master gave node before
// (RememberedGateway): another node's claim does not take it away, or any node could
// unseat another by claiming its address.
func (cfg Config) CheckKeptNodeIP(node *corev1.Node, ip netip.Prefix, nodes []*corev1.Node) error {
	if err := cfg.checkOwnIP(node, ip); err != nil {
		return err
	}
	return checkOthers(node, ip, nodes, false)
}

// checkOwnIP is CheckNodeIP without the other nodes: the ranges and node's InternalIPs.
func (cfg Config) checkOwnIP(node *corev1.Node, ip netip.Prefix) error {
	if err := cfg.checkNodeIPRange(ip); err != nil {
		return err
	}
	if own := statusIPs(node, corev1.NodeInternalIP); len(own) > 0 && !slices.Contains(own, ip.Addr()) {
		return fmt.Errorf("nodeIP %s is not one of the node's InternalIPs %v", ip, own)
	}
	return nil
}

// checkOthers is CheckNodeIP's part about the other nodes; their claims count if withClaims.
func checkOthers(node *corev1.Node, ip netip.Prefix, nodes []*corev1.Node, withClaims bool) error {
	a := ip.Addr()
	own := slices.Contains(statusIPs(node, corev1.NodeInternalIP), a)
	for _, o := range nodes {
		if o.Name == node.Name {
			continue
		}
		if slices.Contains(statusIPs(o, corev1.NodeInternalIP), a) || slices.Contains(statusIPs(o, corev1.NodeExternalIP), a) {
			return fmt.Errorf("nodeIP %s is node %s's address", ip, o.Name)
		}
		// Claims count between nodes the kubelet gave no InternalIP: one whose InternalIP
		// the address is has it on the kubelet's word, whoever else claims it.
		if withClaims && !own && len(statusIPs(o, corev1.NodeInternalIP)) == 0 && claims(o, a) {
			return fmt.Errorf("nodeIP %s is claimed by node %s too", ip, o.Name)
		}
	}
	return nil
}

// claims reports whether node n's chassis annotation names a as its nodeIP.
func claims(n *corev1.Node, a netip.Addr) bool {
	p, ok := annotatedIP(n)
	return ok && p.Addr() == a
}

// annotatedIP is the nodeIP of n's chassis annotation, if it parses.
func annotatedIP(n *corev1.Node) (netip.Prefix, bool) {
	info, err := contract.ParseNodeChassis(n.Annotations[contract.NodeChassisKey])
	if err != nil {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(info.NodeIP)
	return p, err == nil
}

// NodeIPs returns, by node name, the nodeIP of each node of nodes whose chassis annotation
// parses and passes CheckNodeIP: the addresses the master may use for the nodes (per-node
// load balancer VIPs). Nodes without one are left out.
func (cfg Config) NodeIPs(nodes []*corev1.Node) map[string]netip.Addr {
	// Who reports or claims each address, in one pass; the other nodes are looked at only
	// where two meet. The Services' sync asks this often, of every node.
	users := map[netip.Addr][]string{}
	ips := make(map[string]netip.Prefix, len(nodes))
	for _, n := range nodes {
		var mine []netip.Addr
		if p, ok := annotatedIP(n); ok {
			ips[n.Name] = p
			mine = append(mine, p.Addr())
		}
		mine = append(mine, statusIPs(n, corev1.NodeInternalIP)...)
		mine = append(mine, statusIPs(n, corev1.NodeExternalIP)...)
		slices.SortFunc(mine, netip.Addr.Compare)
		for _, a := range slices.Compact(mine) {
			users[a] = append(users[a], n.Name)
		}
	}
	out := make(map[string]netip.Addr, len(ips))
	for _, n := range nodes {
		p, ok := ips[n.Name]
		if !ok || cfg.checkOwnIP(n, p) != nil {
			continue
		}
		if len(users[p.Addr()]) > 1 && checkOthers(n, p, nodes, true) != nil {
			continue
		}
		out[n.Name] = p.Addr()
	}
	return out
}

// RememberedGateway is the gateway the master last wrote for a node, read back from owned,
// the node's rows in the NB (its gateway router, their ports and default route); nil if they
// hold no complete gateway. A node whose new chassis annotation is refused keeps it, as it
// keeps its subnet: the master's own record, never the node's word.
func RememberedGateway(owned []model.Model) *Gateway {
	var gw Gateway
	for _, m := range owned {
		id, ok := nb.IDOf(m)
		if !ok {
			continue
		}
		switch r := m.(type) {
		case *nbdb.LogicalRouter:
			if id.Role == nb.GatewayRouter {
				gw.ChassisID = r.Options["chassis"]
			}
		case *nbdb.LogicalRouterPort:
			if len(r.Networks) != 1 {
				continue
			}
			p, err := netip.ParsePrefix(r.Networks[0])
			if err != nil {
				continue
			}
			switch id.Role {
			case nb.GatewayExternalPort:
				gw.NodeIP, gw.MAC = p, r.MAC
			case nb.GatewayJoinPort:
				gw.JoinIP = p.Addr()
			}
		case *nbdb.LogicalRouterStaticRoute:
			if id.Role == nb.GatewayDefaultRoute {
				gw.NextHop, _ = netip.ParseAddr(r.Nexthop)
			}
		}
	}
	if gw.ChassisID == "" || !gw.NodeIP.IsValid() || gw.MAC == "" || !gw.JoinIP.IsValid() {
		return nil
	}
	return &gw
}
