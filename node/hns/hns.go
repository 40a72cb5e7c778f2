// Package hns is the Windows node's view of the Host Networking Service and of the host's
// IP configuration, in two layers: the small interfaces below, which the OS-neutral node
// code (hostnet's Transparent host) uses, implemented on Windows by a one-to-one shim over
// github.com/Microsoft/hcsshim/hcn and the IP Helper API (the _windows.go files), and
// everywhere by Model, an in-memory HNS that enforces the rules the real one does, so the
// Windows start-up and CNI logic is tested on Linux.
package hns

import (
	"context"
	"errors"
	"net"
	"net/netip"
)

var (
	// ErrNotFound: no network, endpoint, namespace or interface of that name or ID.
	ErrNotFound = errors.New("not found")
	// ErrExists: the adapter is bound to another network, the endpoint attached to
	// another namespace, or a port exists. HNS does not keep names unique: callers look a
	// name up before they create it.
	ErrExists = errors.New("already exists")
	// ErrVirtualAdapter: a Transparent network needs a physical adapter.
	ErrVirtualAdapter = errors.New("adapter is not a physical adapter")
	// ErrInUse: a network with endpoints cannot be deleted.
	ErrInUse = errors.New("in use")
	// ErrNoSubnet: a static endpoint address outside every IPAM subnet of its network.
	ErrNoSubnet = errors.New("address in no subnet of the network")
)

// TypeTransparent is the HNS network type the node uses: the vSwitch is bound to the
// physical adapter and pods sit on the physical segment's L2, which the OVS extension then
// takes over.
const TypeTransparent = "Transparent"

// OVSExtensionID is the Hyper-V switch extension ID of the Open vSwitch extension, which
// HNS enables on a network's vSwitch by ID.
const OVSExtensionID = "583CC151-73EC-4A6A-8B47-578297AD7623"

// Network is an HNS network.
type Network struct {
	ID   string
	Name string
	Type string
	// Adapter is the physical adapter its vSwitch is bound to, and Extensions the vSwitch
	// extensions enabled on that switch (IDs, upper case), both as HNS's v1 API reports
	// them (NetworkAdapterName, Extensions[].IsEnabled).
	Adapter    string
	Extensions []string
	// Subnets are its static IPAM subnets: HNS gives an endpoint a static address only
	// within one of them.
	Subnets []Subnet
}

// Subnet is a static IPAM subnet of a network and its gateway (the default route's next
// hop).
type Subnet struct {
	Prefix  netip.Prefix
	Gateway netip.Addr
}

// DNS is a pod's resolver configuration.
type DNS struct {
	Servers []netip.Addr
	Search  []string // the namespace's full search list, most specific first
}

// Endpoint is an HNS endpoint: a vNIC on a network's vSwitch.
type Endpoint struct {
	ID        string
	Name      string
	NetworkID string
	MAC       net.HardwareAddr
	IPs       []netip.Prefix
	Gateway   netip.Addr
	// Routes are the pod's routes besides the default one (the master's pod annotation).
	Routes []Route
	DNS    DNS
	// Namespace is the HCN namespace (GUID) the endpoint is attached to; NoNamespace, as
	// HNS reports it, or "" when none (see Attached).
	Namespace string
}

// NoNamespace is the namespace HNS reports for an endpoint attached to none; removing an
// endpoint from it fails.
const NoNamespace = "00000000-0000-0000-0000-000000000000"

// Attached reports whether the endpoint is attached to a namespace.
func (e Endpoint) Attached() bool { return e.Namespace != "" && e.Namespace != NoNamespace }

// Networks are HNS's networks.
type Networks interface {
	// Network returns the network called name (the first, if several are), or ErrNotFound.
	Network(ctx context.Context, name string) (Network, error)
	// CreateTransparentNetwork creates a Transparent network called name bound to the
	// physical adapter, with static IPAM subnets. Not idempotent: a second network of the
	// same name is created (ErrExists only if the adapter is bound already);
	// ErrVirtualAdapter for a virtual adapter. On success HNS moves the adapter's IP
	// configuration to the host vNIC "vEthernet (<adapter>)", some time later (or, on some
	// builds, not at all).
	CreateTransparentNetwork(ctx context.Context, name, adapter string, subnets []Subnet) (Network, error)
	// EnableExtension enables the vSwitch extension id on the network's vSwitch and checks
	// that the network reports it enabled. Idempotent. ErrNotFound if the network is gone
	// or the extension is not installed on the host; an error if it stays disabled
	// (Hyper-V runs one forwarding extension per switch, and OVS runs on one switch).
	EnableExtension(ctx context.Context, networkID, id string) error
	// DeleteNetwork deletes the network; ErrInUse while it has endpoints, nil if gone.
	DeleteNetwork(ctx context.Context, id string) error
}

// Endpoints are HNS's endpoints and their attachment to HCN namespaces.
type Endpoints interface {
	// CreateEndpoint creates e on e.NetworkID and returns it with its ID. Not idempotent:
	// a second endpoint of the same name is created; ErrNotFound if the network is gone,
	// ErrNoSubnet if
	// an address is in none of the network's subnets.
	CreateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error)
	// Endpoint returns the endpoint called name (the first, if several are), or ErrNotFound.
	Endpoint(ctx context.Context, name string) (Endpoint, error)
	// ListEndpoints returns the endpoints of a network.
	ListEndpoints(ctx context.Context, networkID string) ([]Endpoint, error)
	// DeleteEndpoint deletes an endpoint, detached or not. Idempotent: nil if it is gone.
	// HNS can hang here; callers bound it with ctx.
	DeleteEndpoint(ctx context.Context, id string) error
	// Attach attaches the endpoint to the namespace; ErrNotFound if either is missing.
	// Idempotent for the same namespace; an error if attached to another.
	Attach(ctx context.Context, namespaceID, endpointID string) error
	// Detach detaches it. Idempotent: nil if not attached or gone.
	Detach(ctx context.Context, namespaceID, endpointID string) error
	// HostNamespace returns the host's default namespace: an endpoint attached to it gets
	// a host vNIC called "vEthernet (<endpoint name>)". ErrNotFound if HNS lists none.
	HostNamespace(ctx context.Context) (string, error)
	// CreateHostNamespace creates a host default namespace and returns it (some hosts list
	// none until one is created, as hcsshim's own tests do).
	CreateHostNamespace(ctx context.Context) (string, error)
}

// HNS is the whole service as the node uses it.
type HNS interface {
	Networks
	Endpoints
}

// Route is a host route.
type Route struct {
	Dst     netip.Prefix
	NextHop netip.Addr
}

// IPConfig is an interface's IP configuration as the node saves and restores it.
type IPConfig struct {
	Addrs   []netip.Prefix
	Gateway netip.Addr // the default route's next hop; zero: none
	DNS     []netip.Addr
	Routes  []Route // routes besides the default and the on-link ones
	MTU     int     // 0: leave
}

// Interface is a host network interface (adapter or vNIC) by its alias.
type Interface struct {
	Name     string
	Index    int
	MAC      net.HardwareAddr
	Physical bool // backed by hardware (NDIS: HardwareInterface), not a vNIC
	// Forwarding: forwarding and weak host sends and receives are on (SetForwarding).
	Forwarding bool
	IPConfig
}

// IPHelper reads and writes the host's interfaces (the IP Helper API on Windows).
type IPHelper interface {
	// Interface returns the interface with that alias in the host's network compartment
	// (the agent's), or ErrNotFound: a pod's vNIC, in the pod's compartment, is not found.
	Interface(ctx context.Context, name string) (Interface, error)
	// PodVNIC returns the vNIC with that alias in any network compartment, or ErrNotFound.
	PodVNIC(ctx context.Context, name string) (VNIC, error)
	// Configure makes the interface hold exactly c's addresses, default gateway, DNS
	// servers and routes (others are removed) and c's MTU if set. Idempotent.
	Configure(ctx context.Context, name string, c IPConfig) error
	// SetMTU sets the IPv4 MTU of the interface with that alias in any network
	// compartment (a pod's vNIC lives in the pod's), or returns ErrNotFound. Idempotent.
	SetMTU(ctx context.Context, name string, mtu int) error
	// SetForwarding enables IPv4 forwarding and weak host sends and receives on the
	// interface with that alias in the host's compartment (MIB_IPINTERFACE_ROW's
	// ForwardingEnabled, WeakHostSend, WeakHostReceive), or returns ErrNotFound.
	// Idempotent. Windows' strong host model otherwise drops a packet that arrives on one
	// interface for an address of another, and sends none from an address through an
	// interface that does not hold it.
	SetForwarding(ctx context.Context, name string) error
}

// VNIC is a vNIC as seen from any network compartment.
type VNIC struct {
	Name        string
	MTU         int
	Compartment int
}

// Features are what the host has installed, for the preflight checks.
type Features struct {
	HyperV       bool // the Hyper-V role (vmms): the vSwitch
	Containers   bool // the Containers feature: HNS and HCN
	OVSExtension bool // the signed Open vSwitch extension driver
	// VirtualMachine: the node is itself a Hyper-V (or other) guest, where pods' MACs
	// reach the physical network only if the host allows MAC address spoofing.
	VirtualMachine bool
}

// System reports the host's features.
type System interface {
	Features(ctx context.Context) (Features, error)
}

// HostVNIC is the alias Windows gives the host vNIC of a vSwitch bound to adapter, or of an
// endpoint attached to the host namespace.
func HostVNIC(name string) string { return "vEthernet (" + name + ")" }
