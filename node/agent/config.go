// Package agent is ovnt-node: it registers the node as an OVN chassis, keeps the Node's
// chassis annotation and the management port in line with the master's node subnet, and
// serves CNI calls. Run starts everything and returns when its context ends.
package agent

import (
	"net/netip"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
)

// IntegrationBridge is the bridge ovn-controller programs; pods and the management port
// are its ports.
const IntegrationBridge = "br-int"

// Config is the node agent's configuration (validated by the command line).
type Config struct {
	NodeName   string
	Kubeconfig string // empty: in-cluster
	SBAddress  string // ovn-remote
	// SBClientKey, SBClientCert and SBCACert, when set, are ovn-controller's TLS identity for
	// ssl: SB remotes, written into the local Open_vSwitch database's SSL row. The
	// certificate's common name must be the chassis name (the node name): the SB's
	// ovn-controller role lets a chassis write only the rows of the chassis its certificate
	// names.
	SBClientKey  string
	SBClientCert string
	SBCACert     string
	OVSAddress   string
	EncapType    string // geneve or stt
	// SBProbeInterval is ovn-controller's SB inactivity probe (ovn-remote-probe-interval);
	// zero leaves OVN's default of 5 s.
	SBProbeInterval time.Duration
	EncapIP         netip.Addr // zero: the node's address
	MTU             int
	// DatapathType is the type of the bridges: "system" (kernel) or "netdev" (userspace).
	DatapathType string

	// OVSDBListen and OpenFlowListen, when set, make the node a remote chassis
	// (docs/remote-chassis.md): its ovn-controller runs on another host and reaches the
	// database through a manager target ("pssl:6640") and br-int through a passive
	// controller target ("pssl:6653"). The listeners' TLS files are the OVS daemons'
	// command-line options: the node keeps no SSL row, which that ovn-controller would
	// apply over its own files.
	OVSDBListen    string
	OpenFlowListen string
	// ListenProbeInterval is the listeners' inactivity probe (node/ovs listener.go says
	// why it is longer than OVS's 5 s); zero leaves OVS's default.
	ListenProbeInterval time.Duration
	// BridgeRemote writes external_ids:ovn-bridge-remote, the node's OpenFlow listener as
	// an ovn-controller of OVN 24.09 or later dials it (that one needs no OpenFlow relay).
	BridgeRemote bool

	// UplinkIface, if set, is moved into GatewayBridge, which takes over the node's
	// address; contract.PhysicalNetwork names it in ovn-bridge-mappings.
	UplinkIface   string
	GatewayBridge string
	// OVSRunDir is where ovs-vswitchd makes its sockets: the agent programs the gateway
	// bridge through <OVSRunDir>/<GatewayBridge>.mgmt.
	OVSRunDir string
	// GatewayResync is how often the gateway bridge's flows are read back and restored
	// even when nothing changed in the database.
	GatewayResync time.Duration

	// LocalNodePorts makes the host's own connections to its node IP's NodePorts reach the
	// Service (nf_tables on Linux).
	LocalNodePorts bool

	// ClusterCIDRs and ServiceCIDRs are routed from the node through the management port.
	ClusterCIDRs []netip.Prefix
	ServiceCIDRs []netip.Prefix
	// JoinSubnet is the master's join subnet and AllowedExternalIPs the ranges Services may
	// claim as external IPs: with the two above and every node's address they decide which
	// external IPs get a gateway bridge entry point (svcmodel.ExternalIPPolicy), exactly as
	// the master decides which get a load balancer VIP.
	JoinSubnet         netip.Prefix
	AllowedExternalIPs []netip.Prefix
	// ServiceLimits refuse Services with too many frontends, as the master does.
	ServiceLimits svcmodel.Limits

	CNISocket  string
	CNIBinDir  string
	CNIConfDir string
	CNIPlugin  string // the ovnt-cni binary to install; empty: beside the agent's binary

	AnnotationTTL      time.Duration // how long ADD waits for the master's pod annotation
	PortInstallTimeout time.Duration // how long ADD waits for ovn-controller
	LeakCollect        time.Duration // how often the agent collects the attachments of pods that are gone
	HealthAddress      string        // /metrics, /healthz, /readyz; "" for none
}
