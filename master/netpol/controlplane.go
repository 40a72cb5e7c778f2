package netpol

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// NodeSwitchesGroup is the port group holding the management port of every node switch:
// an ACL of a port group applies on every switch the group has a port of, so the ACLs of
// this group are the cluster's default rules on every node switch.
const NodeSwitchesGroup = "ovnt_node_switches"

// PriorityControlPlane is the drop of pod traffic to the control plane's ports: below every
// policy's allows, so an egress policy that allows it wins, and above OVN's default allow.
const PriorityControlPlane = PriorityDeny - 1

// DefaultControlPlanePorts are the OVN central's TCP ports: Northbound, Southbound, and the
// RAFT cluster links of each.
var DefaultControlPlanePorts = []uint16{6641, 6642, 6643, 6644}

// ControlPlane is where the cluster's control plane listens, which pods must not reach
// unless a NetworkPolicy allows it.
type ControlPlane struct {
	Addresses []netip.Prefix // IPv4 addresses or ranges; none: no rule
	Ports     []uint16       // TCP ports; none: DefaultControlPlanePorts
	// MgmtAddr and MgmtMask, when valid, are every node's management port address as one
	// address and mask (contract.ManagementAddresses), which the drop covers too: a
	// Service's load balancer on a node switch writes the node's own host-network endpoints
	// as the management address, and the node delivers that to the node IP
	// (master/services README, "Host-network endpoints"), so a control plane on a node
	// would otherwise be reached from that node's pods through a Service.
	MgmtAddr, MgmtMask netip.Addr
}

// ClusterRows returns the port group of every node switch (anchored on the management ports
// mgmtPorts, UUIDs of their rows) and the cluster-wide ACLs on it: the drop of new
// connections from pods to cp. The drop is judged after the load balancers, like egress
// policies, so a Service whose backend is the control plane is no way around it. Nothing
// when cp has no address.
func ClusterRows(cp ControlPlane, mgmtPorts []string) ([]nb.Row, error) {
	if len(cp.Addresses) == 0 {
		return nil, nil
	}
	var addrs []string
	for _, p := range cp.Addresses {
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("control plane address %s: only IPv4 is supported", p)
		}
		addrs = append(addrs, p.Masked().String())
	}
	ports := cp.Ports
	if len(ports) == 0 {
		ports = DefaultControlPlanePorts
	}
	var ps []string
	for _, p := range ports {
		if p == 0 {
			return nil, fmt.Errorf("control plane port 0")
		}
		ps = append(ps, fmt.Sprint(p))
	}
	pg := nb.NewID(nb.Cluster, nb.ClusterName, nb.NodeSwitches)
	members := slices.Sorted(slices.Values(mgmtPorts))
	name := "cluster/control-plane-deny"
	dst := fmt.Sprintf("ip4.dst == {%s}", strings.Join(addrs, ", "))
	if cp.MgmtAddr.Is4() && cp.MgmtMask.Is4() {
		dst = fmt.Sprintf("(%s || ip4.dst == %s/%s)", dst, cp.MgmtAddr, cp.MgmtMask)
	}
	match := fmt.Sprintf("%s && tcp.dst == {%s}", dst, strings.Join(ps, ", "))
	return []nb.Row{
		{ID: pg, Model: &nbdb.PortGroup{Name: NodeSwitchesGroup, Ports: members}},
		{ID: nb.NewID(nb.Cluster, nb.ClusterName, nb.ControlPlaneDeny), Parent: pg, Model: &nbdb.ACL{
			Name: &name, Direction: nbdb.ACLDirectionFromLport, Priority: PriorityControlPlane,
			Action: nbdb.ACLActionDrop, Match: match, Options: map[string]string{"apply-after-lb": "true"},
		}},
	}, nil
}
