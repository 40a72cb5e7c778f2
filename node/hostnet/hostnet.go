// Package hostnet is the operating-system side of the node agent: the pod's interface, the
// management port's host interface and the move of the node's address onto the gateway
// bridge. Everything that talks to the OVS database or the API server is shared code
// elsewhere; what differs between Linux (veth pairs, netlink, network namespaces) and Windows
// (HNS endpoints, a Transparent network) is behind Host.
package hostnet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// Host sets up the node's own networking. Every method converges: calling it again with the
// same arguments changes nothing and succeeds.
type Host interface {
	// CreatePodInterface creates the pod's interface: the host side (p.HostIfName) stays in
	// the node, the pod side goes into p.Netns as p.IfName with p's MAC, addresses, routes
	// and MTU. If the host side exists already and matches p (a repeated ADD), it returns it
	// with Created false and changes nothing; if it exists and does not match, it fails.
	// On failure it removes whatever it created.
	CreatePodInterface(ctx context.Context, p PodInterface) (Attached, error)
	// CheckPodInterface returns an error naming the first way the pod's interface differs
	// from p (missing, other MAC, address or route missing), or nil.
	CheckPodInterface(ctx context.Context, p PodInterface) error
	// DeletePodInterface removes the pod's interface, both sides. It succeeds when the
	// interface, or the pod's network namespace, is already gone.
	DeletePodInterface(ctx context.Context, ref PodRef) error
	// SetupManagementPort configures the management port's host interface (a device the
	// switch created for an internal port): MAC, address, MTU, routes to the cluster through
	// the pod subnet's gateway; stale addresses and routes on it are removed.
	SetupManagementPort(ctx context.Context, m ManagementPort) error
	// SetupUplink makes the gateway bridge the node's interface on the physical network,
	// and returns the node's address. With u.Iface set, it calls u.Attach with the uplink's
	// MAC (to put the uplink into the bridge) and moves the uplink's addresses and routes to
	// the bridge's own interface, keeping the node reachable; a restart finds the move done.
	// With u.Iface empty it only finds the node's address.
	SetupUplink(ctx context.Context, u Uplink) (NodeAddress, error)
}

// LateBinder is implemented by hosts on which a pod's interface appears only after ADD has
// returned, so that its switch port cannot be finished inside ADD (and on which the
// management port, likewise, may not be in the switch before its device: see
// ManagementPort.AddPort). On Windows containerd
// starts the sandbox, which creates the endpoint's vNIC, after ADD; and OVS binds an
// "internal" interface to the Hyper-V port of its name, or, finding none, makes a stray
// host vNIC of that name and binds that one for good. So ADD creates the port with an empty
// type (which OVS binds to nothing) and returns at once, and the agent calls
// AwaitPodInterface afterwards, then gives the port the type it returns.
type LateBinder interface {
	// AwaitPodInterface waits until ctx ends for the pod's interface to exist, gives it
	// mtu (if not 0), and returns the type its switch port must take now. Idempotent: an
	// interface that exists with that MTU is left as it is.
	AwaitPodInterface(ctx context.Context, ref PodRef, mtu int) (portType string, err error)
}

// Volatile is implemented by hosts whose pod interfaces can vanish while their switch ports
// stay. Windows: HNS networks and endpoints do not survive a reboot, the OVS database does,
// and once the extension is enabled again OVS gives every internal port whose Hyper-V port
// is gone a stray host vNIC of that name. The agent removes such ports at start, before
// the uplink.
// InterfaceFirst is implemented by hosts where removing a pod's switch port also removes
// the vSwitch port under its interface (Windows: OVS deletes the Hyper-V port of an
// internal interface it removes, the HNS endpoint's included, and HNS is left with an
// endpoint whose port is gone). DEL removes the interface first there, and keeps the
// switch port while the interface's removal has not finished (an HNS deletion that hung).
type InterfaceFirst interface {
	Volatile
	interfaceFirst()
}

type Volatile interface {
	// PodInterfaceExists reports whether the pod interface whose host side is called
	// name (see HostIfName) exists; an error when that is not known.
	PodInterfaceExists(ctx context.Context, name string) (bool, error)
}

// SubnetHolder is implemented by hosts whose uplink is built with the node's pod subnet
// (Windows: the Transparent network's static IPAM subnet, see Uplink.PodSubnet), so that
// SetupUplink cannot run before the subnet is known.
type SubnetHolder interface {
	// KnownPodSubnet returns the pod subnet the host's existing uplink was built with,
	// and false when there is none (first start, or after a reboot on Windows, which
	// HNS networks do not survive). With it the agent repairs the node's own connectivity
	// before it can reach the API server: on Windows a node whose host vNIC OVS has not
	// bound is offline.
	KnownPodSubnet(ctx context.Context) (netip.Prefix, bool, error)
}

// PodInterface is a pod's interface as the master allocated it.
type PodInterface struct {
	PodRef
	MAC      net.HardwareAddr
	IPs      []netip.Prefix
	Gateways []netip.Addr
	Routes   []contract.ParsedRoute
	MTU      int
	// DNS is the resolver configuration the runtime passed (Windows: HNS configures the
	// pod's resolver from its endpoint; Linux leaves it to kubelet). May be empty.
	DNS DNS
}

// DNS is a pod's resolver configuration: servers and the namespace's full search list.
type DNS struct {
	Servers []netip.Addr
	Search  []string
}

// PodRef names a pod interface: the CNI attachment (container ID and interface name), the
// pod's network namespace, and the host side's name.
type PodRef struct {
	ContainerID string
	Netns       string // may be empty or gone on DEL
	IfName      string
	HostIfName  string
}

// Attached is the host side of a pod interface.
type Attached struct {
	HostIfName string
	HostMAC    net.HardwareAddr
	Created    bool // false: it existed already and was left as it was
}

// ManagementPort is the node's interface into the pod network.
type ManagementPort struct {
	IfName  string
	MAC     net.HardwareAddr
	IP      netip.Prefix // the .2 of the node's pod subnet, with the subnet's length
	Gateway netip.Addr   // the .1, the cluster router
	Routes  []netip.Prefix
	MTU     int
	// AddPort puts the management port (an internal port named IfName) into the
	// integration bridge; idempotent. The host calls it when OVS can bind the port to the
	// right device: first on Linux, where OVS creates the device; on Windows only once
	// the HNS endpoint's vNIC exists, since OVS binds an internal interface to the Hyper-V
	// port of its name and, finding none, makes a stray host vNIC of its own.
	AddPort func(ctx context.Context) error
	// RemovePort takes the port out of the bridge; idempotent. Windows calls it before it
	// replaces the endpoint, so that OVS binds no stray vNIC while there is none.
	RemovePort func(ctx context.Context) error
}

// Uplink says how the node reaches the physical network.
type Uplink struct {
	// Iface is the network device to move into the gateway bridge; empty means none.
	Iface string
	// Bridge is the gateway bridge, whose own interface takes over the node's address.
	Bridge string
	// PreferIP picks the node's address when the interface has several; zero: the first
	// IPv4 address.
	PreferIP netip.Addr
	// Attach puts Iface into Bridge in the switch database, with mac as the bridge's MAC.
	Attach func(ctx context.Context, mac net.HardwareAddr) error
	// PodSubnet is the node's pod subnet, with the gateway pods route through. Windows
	// needs it (the zero prefix is refused there): the Transparent network is created with
	// it as its static IPAM subnet, since HNS gives endpoints static addresses only within
	// a subnet of their network. Linux ignores it.
	PodSubnet       netip.Prefix
	PodSubnetRouter netip.Addr
	// AttachHostPort puts the named host interface into Bridge as an internal port. Only
	// Windows calls it, for the host vNIC that keeps the node's address (on Linux the
	// bridge's own interface takes the address); nil is allowed where it is not needed.
	AttachHostPort func(ctx context.Context, name string) error
}

// NodeAddress is the node's address on the physical network.
type NodeAddress struct {
	IfName  string       // the interface holding it (the gateway bridge's, with an uplink)
	IP      netip.Prefix // e.g. 172.18.0.1/24
	MAC     net.HardwareAddr
	NextHop netip.Addr // the default gateway; zero if none
	// HostPort names the gateway bridge's port that is this interface, when it is a port of
	// the bridge other than the bridge's own (Windows: the host vNIC, added through
	// Uplink.AttachHostPort); empty when it is the bridge's own interface (Linux) or none.
	HostPort string
	// SwitchID names the switch the node's ports are attached to where it can be replaced
	// under the switch database (Windows: the HNS network's ID, new after every reboot);
	// empty elsewhere. A new one means ovs-vswitchd must be made to add the ports again.
	SwitchID string
}

// ErrUnsupported is what every method returns on a system that is neither Linux nor Windows
// (hostnet_other.go): the tree builds there, for its pure packages and tests, but no node runs.
var ErrUnsupported = errors.New("hostnet: ovnt-node runs on Linux and Windows only")

// HostIfName is the name of the host side of a pod's interface: derived from the CNI
// attachment (container ID, interface name) so DEL and GC find it without state, short
// enough for Linux's 15-character limit, and prefixed so an operator knows whose it is.
func HostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifName))
	return "ovt" + hex.EncodeToString(sum[:])[:12]
}
