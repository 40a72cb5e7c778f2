package nb

import (
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// The ownership registry: the marks the master puts on every row it writes. Ownership is how
// the master finds its own rows again: a controller syncing one object reads the rows
// carrying that object's kind and key, and a row is stale exactly when it carries our owner
// kind and nothing desires it. An operator reading `ovn-nbctl list` sees the same marks and
// can find the object.

// External-id keys. Together they form an ID.
const (
	KindKey = "k8s.ovn-transparent.io/owner-kind"
	NameKey = "k8s.ovn-transparent.io/owner"
	RoleKey = "k8s.ovn-transparent.io/role"
	// ScopeKey tells apart the rows one owner has in one role, where a role alone cannot
	// (a Service's load balancer per protocol, or per protocol and node).
	ScopeKey = "k8s.ovn-transparent.io/scope"
)

// Kind is the kind of object that owns a row.
type Kind string

// Owner kinds.
const (
	// Cluster owns the rows every node shares: the cluster router and the join switch.
	Cluster Kind = "Cluster"
	Node    Kind = "Node"
	Pod     Kind = "Pod"
	Service Kind = "Service"
	// NetworkPolicy owns a policy's port group and ACLs; key "namespace/name".
	NetworkPolicy Kind = "NetworkPolicy"
	// NetworkPolicyPeer owns the address set of one normalised peer selector, shared by
	// every policy with an identical peer; key: the hash of the normal form (package netpol).
	NetworkPolicyPeer Kind = "NetworkPolicyPeer"
)

// ClusterName is the owner key of the rows of kind Cluster; there is one cluster.
const ClusterName = "cluster"

// Role is the part a row plays for its owner. Within one owner, each role names at most one
// row, so (kind, owner, role) identifies a row.
type Role string

// Roles of the rows owned by the Cluster.
const (
	ClusterRouter           Role = "cluster-router"
	JoinSwitch              Role = "join-switch"
	ClusterRouterJoinPort   Role = "cluster-router-join-port"
	JoinSwitchToClusterPort Role = "join-switch-cluster-port"
	// ClusterLBGroup is the load balancer group every node switch and gateway router
	// references; the cluster-wide load balancers of every Service are in it.
	ClusterLBGroup Role = "cluster-lb-group"
	// The meter that rate-limits the log messages of logged ACLs, and its band.
	ACLLogMeter     Role = "acl-log-meter"
	ACLLogMeterBand Role = "acl-log-meter-band"
	// NodeSwitches is a port group of one port (the management port) of every node switch:
	// what cluster-wide ACLs hang on, since an ACL of a port group applies on every switch
	// the group has a port of. ControlPlaneDeny is such an ACL (package netpol).
	NodeSwitches     Role = "node-switches"
	ControlPlaneDeny Role = "control-plane-deny"
)

// Roles of the rows owned by a Node.
const (
	NodeSwitch            Role = "node-switch"
	NodeRouterPort        Role = "node-router-port"        // rtos-<node> on the cluster router
	NodeSwitchRouterPort  Role = "node-switch-router-port" // stor-<node>
	ManagementPort        Role = "mgmt-port"
	GatewayRouter         Role = "gateway-router"
	GatewayJoinPort       Role = "gateway-join-port"        // rtoj-GR_<node>
	JoinSwitchGatewayPort Role = "join-switch-gateway-port" // jtor-GR_<node>
	ExternalSwitch        Role = "external-switch"
	GatewayExternalPort   Role = "gateway-external-port" // rtoe-GR_<node>
	ExternalSwitchGWPort  Role = "external-switch-gateway-port"
	LocalnetPort          Role = "localnet-port"
	NodeSubnetRoute       Role = "route-node-subnet"     // cluster router, src-ip policy
	GatewayJoinIPRoute    Role = "route-gateway-join-ip" // cluster router, /32 to the GR
	GatewayClusterRoute   Role = "route-gateway-cluster" // GR: cluster CIDR back to the cluster router
	GatewayDefaultRoute   Role = "route-gateway-default" // GR: default route to the physical next hop
	GatewaySNAT           Role = "snat"
	// NodeHostReroute is the cluster router's policy that sends the node's pods' packets for
	// the node's own address to its management port (status.hostIP).
	NodeHostReroute Role = "reroute-node-host"
	// NodeTemplateVars is the node's Chassis_Template_Var row (NODEIP for NodePort templates).
	NodeTemplateVars Role = "template-vars"
)

// Roles of the rows owned by a Pod.
const (
	PodPort Role = "pod-port"
)

// Roles of the rows owned by a NetworkPolicy and by a NetworkPolicyPeer.
const (
	PolicyPods    Role = "policy-pods" // the port group of the pods a policy selects
	PolicyACL     Role = "acl"         // scoped: one row per rule
	PeerAddresses Role = "peer-addresses"
)

// Roles of the rows owned by a Service. They are scoped: the scope is the protocol
// ("tcp") for the cluster-wide load balancer and "<protocol>/<node>" for per-node ones.
const (
	ServiceClusterLB    Role = "lb-cluster"     // in the cluster LB group
	ServiceNodeRouterLB Role = "lb-node-router" // externalTrafficPolicy Local, on GR_<node>
	ServiceNodeSwitchLB Role = "lb-node-switch" // internalTrafficPolicy Local, on switch <node>
)

type roleSpec struct {
	kind  Kind
	table string
	// scoped roles name several rows of one owner, told apart by ID.Scope (a Service's
	// load balancer per protocol or per protocol and node, a policy's ACL per rule).
	scoped bool
}

// roles declares every role the master writes: the kind that owns it and its table. It is
// the registry; nothing writes a role missing from it.
var roles = map[Role]roleSpec{
	ClusterRouter:           {kind: Cluster, table: nbdb.LogicalRouterTable},
	JoinSwitch:              {kind: Cluster, table: nbdb.LogicalSwitchTable},
	ClusterRouterJoinPort:   {kind: Cluster, table: nbdb.LogicalRouterPortTable},
	JoinSwitchToClusterPort: {kind: Cluster, table: nbdb.LogicalSwitchPortTable},
	ClusterLBGroup:          {kind: Cluster, table: nbdb.LoadBalancerGroupTable},
	ACLLogMeter:             {kind: Cluster, table: nbdb.MeterTable},
	ACLLogMeterBand:         {kind: Cluster, table: nbdb.MeterBandTable},
	NodeSwitches:            {kind: Cluster, table: nbdb.PortGroupTable},
	ControlPlaneDeny:        {kind: Cluster, table: nbdb.ACLTable},

	NodeSwitch:            {kind: Node, table: nbdb.LogicalSwitchTable},
	NodeRouterPort:        {kind: Node, table: nbdb.LogicalRouterPortTable},
	NodeSwitchRouterPort:  {kind: Node, table: nbdb.LogicalSwitchPortTable},
	ManagementPort:        {kind: Node, table: nbdb.LogicalSwitchPortTable},
	GatewayRouter:         {kind: Node, table: nbdb.LogicalRouterTable},
	GatewayJoinPort:       {kind: Node, table: nbdb.LogicalRouterPortTable},
	JoinSwitchGatewayPort: {kind: Node, table: nbdb.LogicalSwitchPortTable},
	ExternalSwitch:        {kind: Node, table: nbdb.LogicalSwitchTable},
	GatewayExternalPort:   {kind: Node, table: nbdb.LogicalRouterPortTable},
	ExternalSwitchGWPort:  {kind: Node, table: nbdb.LogicalSwitchPortTable},
	LocalnetPort:          {kind: Node, table: nbdb.LogicalSwitchPortTable},
	NodeSubnetRoute:       {kind: Node, table: nbdb.LogicalRouterStaticRouteTable},
	GatewayJoinIPRoute:    {kind: Node, table: nbdb.LogicalRouterStaticRouteTable},
	GatewayClusterRoute:   {kind: Node, table: nbdb.LogicalRouterStaticRouteTable},
	GatewayDefaultRoute:   {kind: Node, table: nbdb.LogicalRouterStaticRouteTable},
	GatewaySNAT:           {kind: Node, table: nbdb.NATTable},
	NodeHostReroute:       {kind: Node, table: nbdb.LogicalRouterPolicyTable},
	NodeTemplateVars:      {kind: Node, table: nbdb.ChassisTemplateVarTable},

	PodPort: {kind: Pod, table: nbdb.LogicalSwitchPortTable},

	ServiceClusterLB:    {kind: Service, table: nbdb.LoadBalancerTable, scoped: true},
	ServiceNodeRouterLB: {kind: Service, table: nbdb.LoadBalancerTable, scoped: true},
	ServiceNodeSwitchLB: {kind: Service, table: nbdb.LoadBalancerTable, scoped: true},

	PolicyPods:    {kind: NetworkPolicy, table: nbdb.PortGroupTable},
	PolicyACL:     {kind: NetworkPolicy, table: nbdb.ACLTable, scoped: true},
	PeerAddresses: {kind: NetworkPolicyPeer, table: nbdb.AddressSetTable},
}

// Key names the object that owns rows: what one controller sync handles.
type Key struct {
	Kind Kind
	Name string // node name, "namespace/name" of a pod, ClusterName
}

func (k Key) String() string { return string(k.Kind) + " " + k.Name }

// Known reports whether the master has a controller for k's kind.
func (k Key) Known() bool {
	switch k.Kind {
	case Cluster, Node, Pod, Service, NetworkPolicy, NetworkPolicyPeer:
		return true
	}
	return false
}

// ID identifies one row: its owner, its role and, for scoped roles, its scope.
type ID struct {
	Key
	Role  Role
	Scope string
}

// NewID is the ID of the row playing role for the owner kind/name.
func NewID(kind Kind, name string, role Role) ID {
	return ID{Key: Key{Kind: kind, Name: name}, Role: role}
}

// WithScope returns id with scope s.
func (id ID) WithScope(s string) ID { id.Scope = s; return id }

func (id ID) String() string {
	if id.Scope != "" {
		return id.Key.String() + " " + string(id.Role) + " " + id.Scope
	}
	return id.Key.String() + " " + string(id.Role)
}

// Validate checks that id's role is registered for id's kind and that the owner is named.
func (id ID) Validate() error {
	spec, ok := roles[id.Role]
	if !ok {
		return fmt.Errorf("nb: %s: role %q is not registered", id, id.Role)
	}
	if spec.kind != id.Kind {
		return fmt.Errorf("nb: %s: role %q belongs to kind %s", id, id.Role, spec.kind)
	}
	if id.Name == "" {
		return fmt.Errorf("nb: %s: no owner name", id)
	}
	if spec.scoped != (id.Scope != "") {
		return fmt.Errorf("nb: %s: role %q wants a scope: %v", id, id.Role, spec.scoped)
	}
	return nil
}

// Table is the NB table rows of id's role live in, or "" for an unregistered role.
func (id ID) Table() string { return roles[id.Role].table }

// ExternalIDs returns the marks of id, as a new map the caller may extend.
func (id ID) ExternalIDs() map[string]string {
	m := map[string]string{
		KindKey: string(id.Kind),
		NameKey: id.Name,
		RoleKey: string(id.Role),
	}
	if id.Scope != "" {
		m[ScopeKey] = id.Scope
	}
	return m
}

// FromExternalIDs reads the marks of a row. ours is false when the row carries no owner
// kind: someone else's row, never touched. A row with an owner kind is ours even when its
// other marks are missing or wrong; err then says what is wrong, and such a row is stale.
func FromExternalIDs(ids map[string]string) (id ID, ours bool, err error) {
	kind, ok := ids[KindKey]
	if !ok {
		return ID{}, false, nil
	}
	id = NewID(Kind(kind), ids[NameKey], Role(ids[RoleKey])).WithScope(ids[ScopeKey])
	return id, true, id.Validate()
}

// Roles returns every registered role of kind, for tests and documentation.
func Roles(kind Kind) []Role {
	var out []Role
	for r, spec := range roles {
		if spec.kind == kind {
			out = append(out, r)
		}
	}
	return out
}
