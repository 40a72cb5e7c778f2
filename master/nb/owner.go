// Package owner is the one registry of the ownership marks the master puts on every
// Northbound row it writes. A row's external_ids name the Kubernetes object it exists for
// (owner kind and owner key) and which part of that object it implements (role).
//
// Ownership is how the master finds its own rows again: a controller syncing one object
// reads the rows carrying that object's kind and key, and a row is stale exactly when it
// carries our owner kind and nothing desires it. An operator reading `ovn-nbctl list` sees
// the same marks and can find the object.
package nb

import (
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

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

// The Northbound tables the master writes.
const (
	LogicalSwitch     = nbdb.LogicalSwitchTable
	LogicalSwitchPort = nbdb.LogicalSwitchPortTable
	LogicalRouter     = nbdb.LogicalRouterTable
	LogicalRouterPort = nbdb.LogicalRouterPortTable
	StaticRoute       = nbdb.LogicalRouterStaticRouteTable
	NAT               = nbdb.NATTable
	LoadBalancer      = nbdb.LoadBalancerTable
	LoadBalancerGroup = nbdb.LoadBalancerGroupTable
	TemplateVar       = nbdb.ChassisTemplateVarTable
	PortGroup         = nbdb.PortGroupTable
	ACL               = nbdb.ACLTable
	AddressSet        = nbdb.AddressSetTable
	Meter             = nbdb.MeterTable
	MeterBand         = nbdb.MeterBandTable
)

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

// ClusterLBGroupName is the name of the cluster's load balancer group. Load_Balancer_Group
// has no external_ids column in the 23.03 schema, so its marks are implied by its name.
const ClusterLBGroupName = "ovnt_cluster_lbg"

// named lists the rows of tables without external_ids that the master owns, by table and
// name.
var named = map[string]map[string]ID{
	LoadBalancerGroup: {ClusterLBGroupName: NewID(Cluster, ClusterName, ClusterLBGroup)},
}

// FromName returns the ID of the row of table (one without external_ids) called name, if
// the master owns such a row.
func FromName(table, name string) (ID, bool) {
	id, ok := named[table][name]
	return id, ok
}

// HasNamed reports whether kind owns rows of table by name (FromName).
func HasNamed(kind Kind, table string) bool {
	for _, id := range named[table] {
		if id.Kind == kind {
			return true
		}
	}
	return false
}

// Unmarked reports whether rows of table carry no external_ids; their ID comes from FromName.
func Unmarked(table string) bool { return table == LoadBalancerGroup }

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
	ClusterRouter:           {kind: Cluster, table: LogicalRouter},
	JoinSwitch:              {kind: Cluster, table: LogicalSwitch},
	ClusterRouterJoinPort:   {kind: Cluster, table: LogicalRouterPort},
	JoinSwitchToClusterPort: {kind: Cluster, table: LogicalSwitchPort},
	ClusterLBGroup:          {kind: Cluster, table: LoadBalancerGroup},
	ACLLogMeter:             {kind: Cluster, table: Meter},
	ACLLogMeterBand:         {kind: Cluster, table: MeterBand},

	NodeSwitch:            {kind: Node, table: LogicalSwitch},
	NodeRouterPort:        {kind: Node, table: LogicalRouterPort},
	NodeSwitchRouterPort:  {kind: Node, table: LogicalSwitchPort},
	ManagementPort:        {kind: Node, table: LogicalSwitchPort},
	GatewayRouter:         {kind: Node, table: LogicalRouter},
	GatewayJoinPort:       {kind: Node, table: LogicalRouterPort},
	JoinSwitchGatewayPort: {kind: Node, table: LogicalSwitchPort},
	ExternalSwitch:        {kind: Node, table: LogicalSwitch},
	GatewayExternalPort:   {kind: Node, table: LogicalRouterPort},
	ExternalSwitchGWPort:  {kind: Node, table: LogicalSwitchPort},
	LocalnetPort:          {kind: Node, table: LogicalSwitchPort},
	NodeSubnetRoute:       {kind: Node, table: StaticRoute},
	GatewayJoinIPRoute:    {kind: Node, table: StaticRoute},
	GatewayClusterRoute:   {kind: Node, table: StaticRoute},
	GatewayDefaultRoute:   {kind: Node, table: StaticRoute},
	GatewaySNAT:           {kind: Node, table: NAT},
	NodeTemplateVars:      {kind: Node, table: TemplateVar},

	PodPort: {kind: Pod, table: LogicalSwitchPort},

	ServiceClusterLB:    {kind: Service, table: LoadBalancer, scoped: true},
	ServiceNodeRouterLB: {kind: Service, table: LoadBalancer, scoped: true},
	ServiceNodeSwitchLB: {kind: Service, table: LoadBalancer, scoped: true},

	PolicyPods:    {kind: NetworkPolicy, table: PortGroup},
	PolicyACL:     {kind: NetworkPolicy, table: ACL, scoped: true},
	PeerAddresses: {kind: NetworkPolicyPeer, table: AddressSet},
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
		return fmt.Errorf("owner: %s: role %q is not registered", id, id.Role)
	}
	if spec.kind != id.Kind {
		return fmt.Errorf("owner: %s: role %q belongs to kind %s", id, id.Role, spec.kind)
	}
	if id.Name == "" {
		return fmt.Errorf("owner: %s: no owner name", id)
	}
	if spec.scoped != (id.Scope != "") {
		return fmt.Errorf("owner: %s: role %q wants a scope: %v", id, id.Role, spec.scoped)
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
