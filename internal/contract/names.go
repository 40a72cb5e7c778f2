package contract

// The names of the Northbound rows of the shared-gateway topology (docs/architecture.md),
// spelled as operators of OVN-based Kubernetes networks expect them:
//
//	ovn_cluster_router ── rtos-<node> ── stor-<node> ── switch <node> ── k8s-<node>, pods <ns>_<pod>
//	        └─ rtoj-ovn_cluster_router ── join ── jtor-GR_<node> ── rtoj-GR_<node> ── GR_<node>
//	GR_<node> ── rtoe-GR_<node> ── etor-GR_<node> ── ext_<node> ── breth0_<node> (localnet)
//
// master/topology writes every one of them. Some are bound by name on the node (the pod
// ports, the management port, the localnet port): ovn-controller matches a logical port to
// an OVS interface by external_ids:iface-id, and to a patch port by the localnet port's
// name, so a name spelt differently on one side compiles, passes each side's tests and
// leaves the port unbound. The rest are read by tests and operators only; they are here so
// that there is one place to read the topology's names from.

const (
	// ClusterRouter is the router every node switch hangs off. Written by the master.
	ClusterRouter = "ovn_cluster_router"
	// JoinSwitch links the cluster router to every gateway router. Written by the master.
	JoinSwitch = "join"
	// ClusterRouterJoinPort is the cluster router's port on the join switch. Written by
	// the master.
	ClusterRouterJoinPort = routerToJoin + ClusterRouter
	// JoinSwitchClusterPort is the join switch's side of ClusterRouterJoinPort. Written by
	// the master.
	JoinSwitchClusterPort = joinToRouter + ClusterRouter
)

// Prefixes of the router-port names: <from>to<to>-, with r the router, s a node switch,
// j the join switch, e an external switch.
const (
	routerToSwitch   = "rtos-"
	switchToRouter   = "stor-"
	routerToJoin     = "rtoj-"
	joinToRouter     = "jtor-"
	routerToExternal = "rtoe-"
	externalToRouter = "etor-"
)

// NodeSwitch is the logical switch of node's pods: the node's name. Written by the master;
// its load balancers and ports refer to it.
func NodeSwitch(node string) string { return node }

// NodeRouterPort is the cluster router's port on node's switch, at RouterIP: the pods'
// gateway. Written by the master.
func NodeRouterPort(node string) string { return routerToSwitch + node }

// NodeSwitchRouterPort is the node switch's side of NodeRouterPort. Written by the master.
func NodeSwitchRouterPort(node string) string { return switchToRouter + node }

// ManagementPort is the logical port of node's management port, on the node's switch.
// Written by the master with ManagementIP; the node agent sets it as the iface-id of its
// OVS interface (MgmtIfName), which is how ovn-controller binds the two.
func ManagementPort(node string) string { return "k8s-" + node }

// maxIfName is the longest name a Linux network interface may have (IFNAMSIZ less the NUL).
const maxIfName = 15

// MgmtIfName is the management port's device and OVS interface name on node: its logical
// port's name, ManagementPort(node), cut to the 15 characters a Linux interface name may
// have (one per node, so a cut name cannot collide). Used by the node agent only; the
// iface-id keeps the full logical name.
func MgmtIfName(node string) string {
	name := ManagementPort(node)
	if len(name) > maxIfName {
		name = name[:maxIfName]
	}
	return name
}

// GatewayRouter is node's gateway router. Written by the master (bound to the node's
// chassis); Services' node-local load balancers are on it.
func GatewayRouter(node string) string { return "GR_" + node }

// GatewayJoinPort is the gateway router's port on the join switch. Written by the master.
func GatewayJoinPort(node string) string { return routerToJoin + GatewayRouter(node) }

// JoinSwitchGatewayPort is the join switch's side of GatewayJoinPort. Written by the master.
func JoinSwitchGatewayPort(node string) string { return joinToRouter + GatewayRouter(node) }

// GatewayExternalPort is the gateway router's port on the physical network, with the
// node's IP and the gateway bridge's MAC. Written by the master.
func GatewayExternalPort(node string) string { return routerToExternal + GatewayRouter(node) }

// ExternalSwitchGatewayPort is the external switch's side of GatewayExternalPort. Written
// by the master.
func ExternalSwitchGatewayPort(node string) string { return externalToRouter + GatewayRouter(node) }

// ExternalSwitch is the switch between node's gateway router and its localnet port.
// Written by the master.
func ExternalSwitch(node string) string { return "ext_" + node }

// LocalnetPort is node's localnet logical port on ExternalSwitch(node), with network name
// PhysicalNetwork. Written by the master; ovn-controller makes a patch port for it on the
// gateway bridge, and the node agent finds that patch port by this name (its
// external_ids:ovn-localnet-port).
func LocalnetPort(node string) string { return localnetPrefix + node }

const localnetPrefix = "breth0_"

// ReservedPodNamespace says whether the pods of namespace would be named like infrastructure
// ports: a pod in namespace "breth0" named after a node would take that node's LocalnetPort
// (security audit L9). No other switch port can be spelled "<namespace>_<pod>": stor- and
// k8s- ports have no underscore, jtor-GR_ and etor-GR_ ports an upper-case letter before
// theirs, and jtor-ovn_cluster_router an underscore after it; Kubernetes names can have
// neither upper case nor underscores.
func ReservedPodNamespace(namespace string) bool { return namespace+"_" == localnetPrefix }

// PodPort is the logical switch port of a pod, "<namespace>_<pod>". Written by the master;
// the node agent sets it as the iface-id of the pod's interface. Neither Kubernetes name
// may contain "_", so the name is unambiguous.
func PodPort(namespace, name string) string { return namespace + "_" + name }

// IfaceIDVer is how ovn-controller tells two incarnations of one pod apart: the node agent
// writes the pod's UID as external_ids:iface-id-ver on the pod's OVS interface, the master
// the same UID as options:iface-id-ver on the pod's logical port, and ovn-controller binds
// the port only to the interface whose value matches. A sandbox left behind by an older pod
// of the same name (a StatefulSet pod rescheduled) cannot claim the port.
const IfaceIDVer = "iface-id-ver"

// ChassisHostname is the hostname node's chassis registers with (Open_vSwitch
// external_ids:hostname, which ovn-controller copies into the SB Chassis row): the node's
// name. The node agent writes it; the master names it in each pod port's
// options:requested-chassis, which OVN matches against a chassis' name or hostname, so only
// the pod's own node binds the pod's port.
func ChassisHostname(node string) string { return node }
