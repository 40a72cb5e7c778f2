// Package hnstest holds Model, the stateful fake of HNS that the Windows node is tested with
// on Linux. It lives apart from package hns so that production code does not link it.
package hnstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/ovstest"
)

// Model is an in-memory HNS, host IP configuration and feature set, for tests. It keeps
// its state in its fields and enforces the rules the node relies on or must survive:
//   - a Transparent network needs an existing, physical adapter, and one adapter serves
//     one network; HNS does not keep network or endpoint names unique: a second of the
//     same name is created, and a look-up by name returns the oldest;
//   - creating it moves the adapter's IP configuration to "vEthernet (<adapter>)" after
//     IPMoveDelay, or never when IPMoveLost is set (what some builds do); enabling the OVS
//     extension while the move is pending loses the address altogether (the DHCP lease
//     the vSwitch was renewing);
//   - an endpoint needs its network, and its static addresses a subnet of the network
//     (Microsoft's network-driver docs: a Transparent network's static addresses need
//     its subnet); an endpoint attached to no namespace reports hns.NoNamespace, the
//     all-zero GUID, and detaching it from that fails; a namespace attach needs the endpoint and the
//     namespace; an endpoint is in one namespace at a time;
//   - deleting a network with endpoints fails;
//   - an attached endpoint has a vNIC "vEthernet (<name>)" (in the host's compartment for
//     the host namespace, else in the pod's: Interface, which reads the agent's (the
//     host's) compartment, does not find a pod's, PodVNIC and SetMTU do), gone when it is
//     detached or deleted. It
//     appears at once for the host namespace, but for a pod's only once the runtime has
//     started the sandbox (StartSandbox): containerd runs CNI ADD before it creates and
//     starts the sandbox, so a pod's vNIC never exists while ADD runs;
//   - the vSwitch's Hyper-V ports: the adapter's (external) once the network exists, the
//     host vNIC's "vEthernet (<adapter>)", and one named after each endpoint whose vNIC
//     exists. Reconfigure plays ovs-vswitchd with the Windows datapath over them (OVS 3.7's
//     lib/dpif-netlink.c and lib/wmi.c): an OVS interface of type "internal" binds the
//     first internal Hyper-V port of its name, and when there is none OVS makes a host
//     vNIC port of that name itself and binds that one (a later port of the same name,
//     the endpoint's real vNIC, stays unbound); an interface of type "" binds only an
//     external port (the physical adapter); removing a bound internal interface, or
//     changing its type, deletes the Hyper-V port of its name, the endpoint's included.
//     A datapath port whose Hyper-V port goes (a vNIC detached) stays in the datapath and
//     is linked again, by the datapath alone, to the next Hyper-V port of its name.
//     Frames from a port OVS has not bound are dropped (Forwards);
//   - ovs-vswitchd tries to add an interface only when it reconfigures: at its start and
//     then only when a column it is alerted on changes (vswitchd/bridge.c bridge_run;
//     external_ids and the columns it writes itself do not count, and on Windows no
//     interface event triggers one, lib/if-notifier-stub.c). An interface it cannot add
//     (no switch has the extension enabled: lib/wmi.c refuses, and no external port
//     exists) stays out, ofport -1, until the next reconfiguration or restart
//     (RestartOVS);
//   - the OVS services start at boot before any vSwitch exists (the MSI's ovsdb-server
//     service depends on vmms only, which does not wait for HNS's networks):
//     ovs-vswitchd's first pass after Reboot finds no datapath;
//   - a host may list no default namespace (NoHostNamespace) until one is created;
//   - a reboot (Reboot) keeps nothing of HNS: networks, endpoints and pods' namespaces are
//     gone, the adapter has its IP configuration back and ovs-vswitchd starts afresh (its
//     database, with every port in it, stays) and reads its database at once;
//   - the physical adapter a network's vSwitch is bound to loses its IP bindings and
//     leaves IP Helper's view (GetAdaptersAddresses lists only adapters with IPv4 or IPv6
//     enabled): Interface and Configure do not find it while the network exists;
//   - enabling the OVS extension (HNS v1's Extensions, Enable-VMSwitchExtension) needs its
//     driver installed, and fails while it is enabled on another network's switch (OVS
//     runs on one vSwitch); a network reports its adapter and enabled extensions as v1
//     does, and a reboot disables the extension with the network gone;
//   - the host's IP stack follows the strong host model on every interface (Windows'
//     default): a packet arriving on one interface for an address of another is dropped,
//     and a packet from an address leaves only through the interface holding it, unless
//     the interface has forwarding or weak host receives (sends) on (SetForwarding;
//     HostAccepts);
//   - "mtu_request" and "mac" of an OVS interface do nothing (netdev-windows has no
//     set_mtu or set_etheraddr): a pod vNIC comes up with MTU 1500 and keeps it until
//     SetMTU.
//
// Every method first consults the faults set with Fail and Hang, by method name.
type Model struct {
	// IPMoveDelay is how long after creating a network its adapter's IP configuration
	// appears on the host vNIC; IPMoveLost: it never does.
	IPMoveDelay time.Duration
	IPMoveLost  bool
	// IPMoveAddrsOnly: the move carries the addresses only, not the gateway, DNS servers
	// or routes (what some builds do).
	IPMoveAddrsOnly bool

	mu         sync.Mutex
	seq        int
	features   hns.Features
	networks   map[string]*hns.Network // by ID
	endpoints  map[string]*hns.Endpoint
	namespaces map[string]*namespace
	hostNS     string
	ports      []*hvPort                 // the vSwitch's Hyper-V ports, oldest first
	ovs        map[string]*ovsIface      // the OVS interfaces Reconfigure last saw, by name
	vswitchdUp bool                      // ovs-vswitchd has read its database since it started
	ifaces     map[string]*hns.Interface // by alias
	podIfaces  map[string]bool           // aliases of vNICs in a pod's compartment
	moves      []pendingMove
	faults     map[string]fault
	calls      []string
}

type namespace struct {
	started bool // the sandbox runs: attached endpoints have their vNIC
}

// hvPort is a port of the network's Hyper-V switch, by its friendly name (ElementName).
type hvPort struct {
	name     string
	endpoint string // the endpoint whose vNIC it is; "" for the adapter's, the host vNIC's and OVS's own
	internal bool   // a host or container vNIC (OVS type "internal"); false: the physical adapter
	byOVS    bool   // made by OVS for an internal interface that had no port of its name
	mac      net.HardwareAddr
}

type ovsIface struct {
	typ    string
	inDP   bool    // ovs-vswitchd added it to the datapath
	bound  *hvPort // the Hyper-V port its datapath port is linked to; nil: none now
	ofport int
}

// Binding is the Hyper-V port OVS bound an interface to.
type Binding struct {
	Port     string // the port's name
	Endpoint string // the endpoint whose vNIC it is; "" if none
	ByOVS    bool   // OVS made the port itself (a stray host vNIC, not the endpoint's)
}

type pendingMove struct {
	from, to string
	cfg      hns.IPConfig
	at       time.Time
}

type fault struct {
	err  error
	hang bool
}

// NewModel returns a host with every feature installed, a host namespace and no adapters.
func NewModel() *Model {
	m := &Model{
		features:   hns.Features{HyperV: true, Containers: true, OVSExtension: true},
		networks:   map[string]*hns.Network{},
		endpoints:  map[string]*hns.Endpoint{},
		namespaces: map[string]*namespace{},
		ifaces:     map[string]*hns.Interface{},
		podIfaces:  map[string]bool{},
		ovs:        map[string]*ovsIface{},
		faults:     map[string]fault{},
	}
	m.hostNS = m.newID()
	m.namespaces[m.hostNS] = &namespace{started: true}
	return m
}

func (m *Model) newID() string {
	m.seq++
	return fmt.Sprintf("0000%04X-0000-0000-0000-%012X", m.seq, m.seq)
}

// SetFeatures replaces the host's feature set.
func (m *Model) SetFeatures(f hns.Features) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.features = f
}

// AddAdapter adds a host interface.
func (m *Model) AddAdapter(name string, mac net.HardwareAddr, physical bool, c hns.IPConfig) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.ifaces[name] = &hns.Interface{Name: name, Index: m.seq, MAC: mac, Physical: physical, IPConfig: cloneConfig(c)}
}

// AddNamespace creates an HCN namespace (what containerd does for a pod sandbox before it
// calls CNI ADD); its sandbox is not started yet.
func (m *Model) AddNamespace() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.newID()
	m.namespaces[id] = &namespace{}
	return id
}

// StartSandbox is the runtime starting the sandbox of namespace id, which containerd does
// after CNI ADD has returned: the vNICs of the endpoints attached to it appear now, and of
// those attached later at once.
func (m *Model) StartSandbox(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns := m.namespaces[id]
	if ns == nil {
		return fmt.Errorf("namespace %s: %w", id, hns.ErrNotFound)
	}
	ns.started = true
	for _, e := range m.endpoints {
		if e.Namespace == id {
			m.addVNIC(e)
		}
	}
	return nil
}

// addVNIC creates e's vNIC and its Hyper-V port, unless they exist.
func (m *Model) addVNIC(e *hns.Endpoint) {
	name := hns.HostVNIC(e.Name)
	if m.ifaces[name] != nil {
		return
	}
	m.seq++
	m.ifaces[name] = &hns.Interface{Name: name, Index: m.seq, MAC: e.MAC, IPConfig: hns.IPConfig{MTU: 1500}}
	m.podIfaces[name] = e.Namespace != m.hostNS
	p := &hvPort{name: e.Name, endpoint: e.Name, internal: true, mac: slices.Clone(e.MAC)}
	m.ports = append(m.ports, p)
	// The datapath links a port of its own whose Hyper-V port went to a new one of the
	// same name by itself (datapath-windows Vport.c binds by the Hyper-V port's name).
	if i := m.ovs[e.Name]; i != nil && i.inDP && i.bound == nil && i.typ == "internal" && m.firstPort(e.Name) == p {
		i.bound = p
	}
}

// removeVNIC removes e's vNIC and its Hyper-V port, and OVS's binding to that port.
func (m *Model) removeVNIC(e *hns.Endpoint) {
	delete(m.ifaces, hns.HostVNIC(e.Name))
	delete(m.podIfaces, hns.HostVNIC(e.Name))
	m.removePorts(func(p *hvPort) bool { return p.endpoint == e.Name })
}

func (m *Model) removePorts(match func(*hvPort) bool) {
	keep := m.ports[:0]
	for _, p := range m.ports {
		if !match(p) {
			keep = append(keep, p)
			continue
		}
		for _, i := range m.ovs {
			if i.bound == p {
				i.bound = nil
			}
		}
	}
	clear(m.ports[len(keep):])
	m.ports = keep
}

func (m *Model) firstPort(name string) *hvPort {
	for _, p := range m.ports {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Reconfigure is ovs-vswitchd on Windows reading its database (see Model's rules): ifaces
// are the interfaces now in it (name to type, every bridge's), and changed says whether a
// column ovs-vswitchd is alerted on changed since its last read. It returns what
// ovs-vswitchd writes back into each Interface row (ofport, error, mac_in_use). Interfaces
// of other types (patch, tunnels) are not Hyper-V ports and are ignored.
func (m *Model) Reconfigure(ifaces map[string]string, changed bool) map[string]ovstest.IfaceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	// bridge_run reconfigures when the IDL's sequence number moved (a change of a column
	// not omitted from alerts: external_ids, ofport, status... do not count) or when
	// if_notifier says so, which on Windows it never does (lib/if-notifier-stub.c). Its
	// first pass after a start is a reconfiguration too.
	if changed || !m.vswitchdUp {
		m.vswitchdUp = true
		m.reconfigure(ifaces)
	}
	return m.ovsStatus(ifaces)
}

func (m *Model) reconfigure(ifaces map[string]string) {
	for name, i := range m.ovs {
		typ, ok := ifaces[name]
		if ok && typ == i.typ {
			continue
		}
		// OVS removes the datapath port; for an internal one it also deletes the Hyper-V
		// port of that name (lib/wmi.c delete_wmi_port), whoever made it.
		if i.typ == "internal" && i.inDP {
			if p := m.firstPort(name); p != nil {
				if p.endpoint != "" {
					delete(m.ifaces, hns.HostVNIC(p.endpoint))
				}
				m.removePorts(func(q *hvPort) bool { return q == p })
			}
		}
		delete(m.ovs, name)
	}
	for name, typ := range ifaces {
		if typ != "" && typ != "internal" {
			continue
		}
		i := m.ovs[name]
		if i == nil {
			i = &ovsIface{typ: typ}
			m.ovs[name] = i
		}
		if i.inDP {
			continue
		}
		// iface_create is tried again at every reconfiguration for an interface that
		// is not in the datapath: no datapath before the extension runs on a switch
		// (lib/wmi.c refuses to add an internal port then, and no external port exists).
		if !m.extensionOn() {
			continue
		}
		p := m.firstPort(name)
		switch {
		case typ == "" && p != nil && !p.internal:
			i.bound = p
		case typ == "internal" && p == nil:
			// lib/wmi.c create_wmi_port: no port of that name, so OVS adds a host vNIC
			// of its own to the switch and binds it.
			m.seq++
			p = &hvPort{name: name, internal: true, byOVS: true, mac: net.HardwareAddr{0x00, 0x15, 0x5d, 0xff, byte(m.seq >> 8), byte(m.seq)}}
			m.ports = append(m.ports, p)
			i.bound = p
		case typ == "internal" && p.internal:
			i.bound = p
		}
		if i.bound != nil {
			m.seq++
			i.inDP, i.ofport = true, m.seq
		}
	}
}

// ovsStatus is what ovs-vswitchd writes into the Interface rows: a bound interface's
// OpenFlow port and the MAC of the port it opened, an unbound one's -1 and why.
func (m *Model) ovsStatus(ifaces map[string]string) map[string]ovstest.IfaceStatus {
	out := map[string]ovstest.IfaceStatus{}
	for name := range ifaces {
		i := m.ovs[name]
		switch {
		case i == nil:
			continue
		case !i.inDP:
			out[name] = ovstest.IfaceStatus{OFPort: -1, Error: "could not open network device " + name + " (No such device)"}
		case i.bound == nil:
			out[name] = ovstest.IfaceStatus{OFPort: i.ofport}
		default:
			out[name] = ovstest.IfaceStatus{OFPort: i.ofport, MACInUse: i.bound.mac.String()}
		}
	}
	return out
}

func (m *Model) extensionOn() bool {
	for _, n := range m.networks {
		if slices.Contains(n.Extensions, hns.OVSExtensionID) {
			return true
		}
	}
	return false
}

// Reboot is the host restarting: HNS networks are not persistent (Antrea's known issue),
// so the networks, their endpoints and vNICs, the Hyper-V ports and the pods' namespaces
// go; the adapter gets its IP configuration back from the host vNIC; ovs-vswitchd has
// bound nothing yet.
func (m *Model) Reboot() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyMoves(time.Now())
	m.moves = nil
	for _, n := range m.networks {
		vnic := hns.HostVNIC(n.Adapter)
		if a, v := m.ifaces[n.Adapter], m.ifaces[vnic]; a != nil && v != nil {
			a.IPConfig = cloneConfig(v.IPConfig)
		}
		delete(m.ifaces, vnic)
	}
	for _, e := range m.endpoints {
		delete(m.ifaces, hns.HostVNIC(e.Name))
	}
	clear(m.networks)
	clear(m.endpoints)
	for id := range m.namespaces {
		if id != m.hostNS {
			delete(m.namespaces, id)
		}
	}
	m.ports = nil
	clear(m.ovs)
	m.vswitchdUp = false
}

// RestartOVS is ovs-vswitchd restarting: its first pass reconfigures, and so binds what it
// can, whether or not the database changed.
func (m *Model) RestartOVS() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vswitchdUp = false
}

// OVSBinding returns the Hyper-V port the OVS interface name is bound to, if any.
func (m *Model) OVSBinding(name string) (Binding, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.ovs[name]
	if i == nil || i.bound == nil {
		return Binding{}, false
	}
	return Binding{Port: i.bound.name, Endpoint: i.bound.endpoint, ByOVS: i.bound.byOVS}, true
}

// Forwards reports whether frames from the vNIC of the endpoint called name reach OVS:
// its Hyper-V port exists and an OVS interface is bound to it (the extension drops frames
// from ports it does not know, datapath-windows PacketIO.c).
func (m *Model) Forwards(endpoint string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, i := range m.ovs {
		if i.bound != nil && i.bound.endpoint == endpoint {
			return true
		}
	}
	return false
}

// HostOnline reports whether the host's own traffic reaches the physical network: through
// the adapter while no network is bound to it, through the host vNIC while the network's
// switch runs no extension, and with the OVS extension enabled only while OVS has bound
// both the host vNIC and the adapter (the extension drops the frames of ports it has not
// bound, and has no other way out).
func (m *Model) HostOnline() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.networks {
		if !slices.Contains(n.Extensions, hns.OVSExtensionID) {
			continue
		}
		if !m.boundPort(n.Adapter) || !m.boundPort(hns.HostVNIC(n.Adapter)) {
			return false
		}
	}
	return true
}

func (m *Model) boundPort(port string) bool {
	for _, i := range m.ovs {
		if i.bound != nil && i.bound.name == port && !i.bound.byOVS {
			return true
		}
	}
	return false
}

// HyperVPorts returns the names of the switch's Hyper-V ports, oldest first.
func (m *Model) HyperVPorts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.ports {
		out = append(out, p.name)
	}
	return out
}

// Fail makes every call of method op return err, until Heal.
func (m *Model) Fail(op string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults[op] = fault{err: err}
}

// Hang makes every call of method op block until its context is done, until Heal.
func (m *Model) Hang(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults[op] = fault{hang: true}
}

// Heal removes the fault on op.
func (m *Model) Heal(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.faults, op)
}

// Calls returns the methods called so far, in order, and forgets them.
func (m *Model) Calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	return out
}

// enter records the call, applies its fault, locks the model and applies due IP moves.
// The caller must m.mu.Unlock() when it returns nil.
func (m *Model) enter(ctx context.Context, op string) error {
	m.mu.Lock()
	m.calls = append(m.calls, op)
	f, ok := m.faults[op]
	m.mu.Unlock()
	if ok && f.hang {
		<-ctx.Done()
		return fmt.Errorf("hns model: %s: %w", op, ctx.Err())
	}
	if ok {
		return fmt.Errorf("hns model: %s: %w", op, f.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	m.applyMoves(time.Now())
	return nil
}

func (m *Model) applyMoves(now time.Time) {
	keep := m.moves[:0]
	for _, mv := range m.moves {
		if now.Before(mv.at) {
			keep = append(keep, mv)
			continue
		}
		if to := m.ifaces[mv.to]; to != nil {
			mtu := to.MTU
			to.IPConfig = cloneConfig(mv.cfg)
			if m.IPMoveAddrsOnly {
				to.IPConfig = hns.IPConfig{Addrs: to.Addrs}
			}
			to.MTU = mtu
		}
	}
	m.moves = keep
}

// Networks returns a copy of the networks.
func (m *Model) Networks() []hns.Network {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []hns.Network
	for _, n := range m.networks {
		out = append(out, cloneNetwork(*n))
	}
	slices.SortFunc(out, func(a, b hns.Network) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AllEndpoints returns a copy of every endpoint.
func (m *Model) AllEndpoints() []hns.Endpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []hns.Endpoint
	for _, e := range m.endpoints {
		out = append(out, cloneEndpoint(*e))
	}
	slices.SortFunc(out, func(a, b hns.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// InterfaceNow returns the interface's current state without faults or call records.
func (m *Model) InterfaceNow(name string) (hns.Interface, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyMoves(time.Now())
	i, ok := m.ifaces[name]
	if !ok {
		return hns.Interface{}, false
	}
	return cloneInterface(*i), true
}

func (m *Model) Features(ctx context.Context) (hns.Features, error) {
	if err := m.enter(ctx, "Features"); err != nil {
		return hns.Features{}, err
	}
	defer m.mu.Unlock()
	return m.features, nil
}

// networkByName returns the oldest network called name: HNS does not keep names unique,
// and a query by name answers with the first match.
func (m *Model) networkByName(name string) *hns.Network {
	var first *hns.Network
	for _, n := range m.networks {
		if n.Name == name && (first == nil || n.ID < first.ID) { // IDs grow with seq
			first = n
		}
	}
	return first
}

func (m *Model) Network(ctx context.Context, name string) (hns.Network, error) {
	if err := m.enter(ctx, "Network"); err != nil {
		return hns.Network{}, err
	}
	defer m.mu.Unlock()
	n := m.networkByName(name)
	if n == nil {
		return hns.Network{}, fmt.Errorf("network %q: %w", name, hns.ErrNotFound)
	}
	return cloneNetwork(*n), nil
}

func (m *Model) CreateTransparentNetwork(ctx context.Context, name, adapter string, subnets []hns.Subnet) (hns.Network, error) {
	if err := m.enter(ctx, "CreateTransparentNetwork"); err != nil {
		return hns.Network{}, err
	}
	defer m.mu.Unlock()
	a := m.ifaces[adapter]
	if a == nil {
		return hns.Network{}, fmt.Errorf("network %q: adapter %q: %w", name, adapter, hns.ErrNotFound)
	}
	if !a.Physical {
		return hns.Network{}, fmt.Errorf("network %q: adapter %q: %w", name, adapter, hns.ErrVirtualAdapter)
	}
	for _, n := range m.networks {
		if n.Adapter == adapter {
			return hns.Network{}, fmt.Errorf("network %q: adapter %q is bound to network %q: %w", name, adapter, n.Name, hns.ErrExists)
		}
	}
	n := &hns.Network{ID: m.newID(), Name: name, Type: hns.TypeTransparent, Adapter: adapter, Subnets: slices.Clone(subnets)}
	m.networks[n.ID] = n
	// The vSwitch takes the adapter: its IP configuration leaves it now and shows up on
	// the host vNIC later.
	vnic := hns.HostVNIC(adapter)
	m.seq++
	m.ifaces[vnic] = &hns.Interface{Name: vnic, Index: m.seq, MAC: a.MAC, IPConfig: hns.IPConfig{MTU: a.MTU}}
	m.ports = append(m.ports, &hvPort{name: adapter, mac: slices.Clone(a.MAC)}, &hvPort{name: vnic, internal: true, mac: slices.Clone(a.MAC)})
	saved := cloneConfig(a.IPConfig)
	a.IPConfig = hns.IPConfig{MTU: a.MTU}
	if !m.IPMoveLost {
		m.moves = append(m.moves, pendingMove{from: adapter, to: vnic, cfg: saved, at: time.Now().Add(m.IPMoveDelay)})
	}
	return cloneNetwork(*n), nil
}

func (m *Model) EnableExtension(ctx context.Context, networkID, id string) error {
	if err := m.enter(ctx, "EnableExtension"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	n := m.networks[networkID]
	if n == nil {
		return fmt.Errorf("network %s: %w", networkID, hns.ErrNotFound)
	}
	id = strings.ToUpper(id)
	if id == hns.OVSExtensionID {
		// Enable-VMSwitchExtension semantics: the extension must be installed (the
		// signed driver), and Open vSwitch runs on one switch of the host only.
		if !m.features.OVSExtension {
			return fmt.Errorf("network %q: extension %s is not installed: %w", n.Name, id, hns.ErrNotFound)
		}
		for _, o := range m.networks {
			if o != n && slices.Contains(o.Extensions, id) {
				return fmt.Errorf("network %q: extension %s stays disabled: it is enabled on the switch of network %q", n.Name, id, o.Name)
			}
		}
	}
	// The extension restarts the vSwitch's data path: a pending move is lost.
	keep := m.moves[:0]
	for _, mv := range m.moves {
		if mv.to != hns.HostVNIC(n.Adapter) {
			keep = append(keep, mv)
		}
	}
	m.moves = keep
	if !slices.Contains(n.Extensions, id) {
		n.Extensions = append(n.Extensions, id)
	}
	return nil
}

func (m *Model) DeleteNetwork(ctx context.Context, id string) error {
	if err := m.enter(ctx, "DeleteNetwork"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	n := m.networks[id]
	if n == nil {
		return nil
	}
	for _, e := range m.endpoints {
		if e.NetworkID == id {
			return fmt.Errorf("network %q: endpoint %q: %w", n.Name, e.Name, hns.ErrInUse)
		}
	}
	delete(m.networks, id)
	delete(m.ifaces, hns.HostVNIC(n.Adapter))
	m.removePorts(func(p *hvPort) bool { return p.endpoint == "" })
	return nil
}

// endpointByName returns the oldest endpoint called name (see networkByName).
func (m *Model) endpointByName(name string) *hns.Endpoint {
	var first *hns.Endpoint
	for _, e := range m.endpoints {
		if e.Name == name && (first == nil || e.ID < first.ID) {
			first = e
		}
	}
	return first
}

func (m *Model) CreateEndpoint(ctx context.Context, e hns.Endpoint) (hns.Endpoint, error) {
	if err := m.enter(ctx, "CreateEndpoint"); err != nil {
		return hns.Endpoint{}, err
	}
	defer m.mu.Unlock()
	n := m.networks[e.NetworkID]
	if n == nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: network %s: %w", e.Name, e.NetworkID, hns.ErrNotFound)
	}
	for _, ip := range e.IPs {
		if !slices.ContainsFunc(n.Subnets, func(s hns.Subnet) bool { return s.Prefix.Contains(ip.Addr()) }) {
			return hns.Endpoint{}, fmt.Errorf("endpoint %q: %s on network %q: %w", e.Name, ip, n.Name, hns.ErrNoSubnet)
		}
	}
	e = cloneEndpoint(e)
	e.ID = m.newID()
	e.Namespace = hns.NoNamespace
	m.endpoints[e.ID] = &e
	return cloneEndpoint(e), nil
}

func (m *Model) Endpoint(ctx context.Context, name string) (hns.Endpoint, error) {
	if err := m.enter(ctx, "Endpoint"); err != nil {
		return hns.Endpoint{}, err
	}
	defer m.mu.Unlock()
	e := m.endpointByName(name)
	if e == nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", name, hns.ErrNotFound)
	}
	return cloneEndpoint(*e), nil
}

func (m *Model) ListEndpoints(ctx context.Context, networkID string) ([]hns.Endpoint, error) {
	if err := m.enter(ctx, "ListEndpoints"); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []hns.Endpoint
	for _, e := range m.endpoints {
		if e.NetworkID == networkID {
			out = append(out, cloneEndpoint(*e))
		}
	}
	slices.SortFunc(out, func(a, b hns.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *Model) DeleteEndpoint(ctx context.Context, id string) error {
	if err := m.enter(ctx, "DeleteEndpoint"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	e := m.endpoints[id]
	if e == nil {
		return nil
	}
	m.removeVNIC(e)
	delete(m.endpoints, id)
	return nil
}

func (m *Model) Attach(ctx context.Context, namespaceID, endpointID string) error {
	if err := m.enter(ctx, "Attach"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	e := m.endpoints[endpointID]
	if e == nil {
		return fmt.Errorf("attaching endpoint %s: %w", endpointID, hns.ErrNotFound)
	}
	ns := m.namespaces[namespaceID]
	if ns == nil {
		return fmt.Errorf("attaching endpoint %q to namespace %s: namespace %w", e.Name, namespaceID, hns.ErrNotFound)
	}
	switch e.Namespace {
	case namespaceID:
		return nil
	case hns.NoNamespace:
	default:
		return fmt.Errorf("attaching endpoint %q to namespace %s: attached to %s: %w", e.Name, namespaceID, e.Namespace, hns.ErrExists)
	}
	e.Namespace = namespaceID
	// The endpoint's vNIC appears in the namespace's compartment (the host's for the host
	// namespace, the pod's otherwise, found by alias in every compartment) once the
	// compartment is in use: at once for the host, when the sandbox starts for a pod.
	if ns.started {
		m.addVNIC(e)
	}
	return nil
}

func (m *Model) Detach(ctx context.Context, namespaceID, endpointID string) error {
	if err := m.enter(ctx, "Detach"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if namespaceID == hns.NoNamespace {
		// What HNS answers (Antrea's isValidHostNamespace guards against it).
		return fmt.Errorf("removing endpoint %s from namespace %s: the parameter is incorrect", endpointID, namespaceID)
	}
	e := m.endpoints[endpointID]
	if e == nil || e.Namespace != namespaceID {
		return nil
	}
	m.removeVNIC(e)
	e.Namespace = hns.NoNamespace
	return nil
}

func (m *Model) HostNamespace(ctx context.Context) (string, error) {
	if err := m.enter(ctx, "HostNamespace"); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	if m.hostNS == "" {
		return "", fmt.Errorf("host default namespace: %w", hns.ErrNotFound)
	}
	return m.hostNS, nil
}

// NoHostNamespace makes the host list no default namespace until one is created (what
// hcsshim's tests prepare for).
func (m *Model) NoHostNamespace() {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.namespaces, m.hostNS)
	m.hostNS = ""
}

func (m *Model) CreateHostNamespace(ctx context.Context) (string, error) {
	if err := m.enter(ctx, "CreateHostNamespace"); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	id := m.newID()
	m.namespaces[id] = &namespace{started: true}
	if m.hostNS == "" {
		m.hostNS = id
	}
	return id, nil
}

func (m *Model) Interface(ctx context.Context, name string) (hns.Interface, error) {
	if err := m.enter(ctx, "Interface"); err != nil {
		return hns.Interface{}, err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil || m.podIfaces[name] || m.boundAdapter(name) { // the agent's compartment is the host's
		return hns.Interface{}, fmt.Errorf("interface %q: %w", name, hns.ErrNotFound)
	}
	return cloneInterface(*i), nil
}

// boundAdapter reports whether name is the physical adapter of a network: the vSwitch
// unbinds IPv4 and IPv6 from it, and IP Helper no longer lists it.
func (m *Model) boundAdapter(name string) bool {
	for _, n := range m.networks {
		if n.Adapter == name {
			return true
		}
	}
	return false
}

func (m *Model) PodVNIC(ctx context.Context, name string) (hns.VNIC, error) {
	if err := m.enter(ctx, "PodVNIC"); err != nil {
		return hns.VNIC{}, err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil {
		return hns.VNIC{}, fmt.Errorf("vNIC %q: %w", name, hns.ErrNotFound)
	}
	return hns.VNIC{Name: name, MTU: i.MTU}, nil
}

func (m *Model) Configure(ctx context.Context, name string, c hns.IPConfig) error {
	if err := m.enter(ctx, "Configure"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil || m.boundAdapter(name) {
		return fmt.Errorf("interface %q: %w", name, hns.ErrNotFound)
	}
	mtu := i.MTU
	i.IPConfig = cloneConfig(c)
	if c.MTU == 0 {
		i.MTU = mtu
	}
	return nil
}

func (m *Model) SetMTU(ctx context.Context, name string, mtu int) error {
	if err := m.enter(ctx, "SetMTU"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil {
		return fmt.Errorf("interface %q: %w", name, hns.ErrNotFound)
	}
	i.MTU = mtu
	return nil
}

func (m *Model) SetForwarding(ctx context.Context, name string) error {
	if err := m.enter(ctx, "SetForwarding"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil || m.podIfaces[name] || m.boundAdapter(name) {
		return fmt.Errorf("interface %q: %w", name, hns.ErrNotFound)
	}
	i.Forwarding = true
	return nil
}

// HostAccepts reports whether the host answers a packet that arrives on interface in for
// its address dst and whose answer leaves through in again (a pod's packet to the node IP
// arriving on the management vNIC, the answer routed back to the pod subnet through it):
// under the strong host model only if dst is in's own address, or in forwards.
func (m *Model) HostAccepts(in string, dst netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyMoves(time.Now())
	i := m.ifaces[in]
	if i == nil {
		return false
	}
	if slices.ContainsFunc(i.Addrs, func(p netip.Prefix) bool { return p.Addr() == dst }) {
		return true
	}
	for _, o := range m.ifaces {
		if slices.ContainsFunc(o.Addrs, func(p netip.Prefix) bool { return p.Addr() == dst }) {
			return i.Forwarding // weak host receive on in, weak host send through in
		}
	}
	return false
}

func cloneConfig(c hns.IPConfig) hns.IPConfig {
	c.Addrs = slices.Clone(c.Addrs)
	c.DNS = slices.Clone(c.DNS)
	c.Routes = slices.Clone(c.Routes)
	return c
}

func cloneInterface(i hns.Interface) hns.Interface {
	i.MAC = slices.Clone(i.MAC)
	i.IPConfig = cloneConfig(i.IPConfig)
	return i
}

func cloneNetwork(n hns.Network) hns.Network {
	n.Extensions = slices.Clone(n.Extensions)
	n.Subnets = slices.Clone(n.Subnets)
	return n
}

func cloneEndpoint(e hns.Endpoint) hns.Endpoint {
	e.MAC = slices.Clone(e.MAC)
	e.IPs = slices.Clone(e.IPs)
	e.Routes = slices.Clone(e.Routes)
	e.DNS.Servers = slices.Clone(e.DNS.Servers)
	e.DNS.Search = slices.Clone(e.DNS.Search)
	return e
}

var (
	_ hns.HNS      = (*Model)(nil)
	_ hns.IPHelper = (*Model)(nil)
	_ hns.System   = (*Model)(nil)
)
