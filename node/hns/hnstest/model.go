// Package hnstest holds Model, the stateful fake of HNS that the Windows node is tested with
// on Linux. It lives apart from package hns so that production code does not link it.
package hnstest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hns"
)

// Model is an in-memory HNS, host IP configuration and feature set, for tests. It keeps
// its state in its fields and enforces the rules the node relies on or must survive:
//   - a Transparent network needs an existing, physical adapter; names are unique;
//   - creating it moves the adapter's IP configuration to "vEthernet (<adapter>)" after
//     IPMoveDelay, or never when IPMoveLost is set (what some builds do); enabling the OVS
//     extension while the move is pending loses the address altogether (the DHCP lease
//     the vSwitch was renewing);
//   - an endpoint needs its network; a namespace attach needs the endpoint and the
//     namespace; an endpoint is in one namespace at a time;
//   - deleting a network with endpoints fails;
//   - an attached endpoint has a vNIC "vEthernet (<name>)" (in the host's compartment for
//     the host namespace, else in the pod's), gone when it is detached or deleted.
//
// Every method first consults the faults set with Fail and Hang, by method name.
type Model struct {
	// IPMoveDelay is how long after creating a network its adapter's IP configuration
	// appears on the host vNIC; IPMoveLost: it never does.
	IPMoveDelay time.Duration
	IPMoveLost  bool

	mu         sync.Mutex
	seq        int
	features   hns.Features
	networks   map[string]*hns.Network // by ID
	endpoints  map[string]*hns.Endpoint
	namespaces map[string]bool
	hostNS     string
	ifaces     map[string]*hns.Interface // by alias
	moves      []pendingMove
	faults     map[string]fault
	calls      []string
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
		namespaces: map[string]bool{},
		ifaces:     map[string]*hns.Interface{},
		faults:     map[string]fault{},
	}
	m.hostNS = m.newID()
	m.namespaces[m.hostNS] = true
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

// AddNamespace creates an HCN namespace (what containerd does for a pod sandbox).
func (m *Model) AddNamespace() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.newID()
	m.namespaces[id] = true
	return id
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

func (m *Model) networkByName(name string) *hns.Network {
	for _, n := range m.networks {
		if n.Name == name {
			return n
		}
	}
	return nil
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

func (m *Model) CreateTransparentNetwork(ctx context.Context, name, adapter string) (hns.Network, error) {
	if err := m.enter(ctx, "CreateTransparentNetwork"); err != nil {
		return hns.Network{}, err
	}
	defer m.mu.Unlock()
	if m.networkByName(name) != nil {
		return hns.Network{}, fmt.Errorf("network %q: %w", name, hns.ErrExists)
	}
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
	n := &hns.Network{ID: m.newID(), Name: name, Type: hns.TypeTransparent, Adapter: adapter}
	m.networks[n.ID] = n
	// The vSwitch takes the adapter: its IP configuration leaves it now and shows up on
	// the host vNIC later.
	vnic := hns.HostVNIC(adapter)
	m.seq++
	m.ifaces[vnic] = &hns.Interface{Name: vnic, Index: m.seq, MAC: a.MAC, IPConfig: hns.IPConfig{MTU: a.MTU}}
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
	// The extension restarts the vSwitch's data path: a pending move is lost.
	keep := m.moves[:0]
	for _, mv := range m.moves {
		if mv.to != hns.HostVNIC(n.Adapter) {
			keep = append(keep, mv)
		}
	}
	m.moves = keep
	id = strings.ToUpper(id)
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
	return nil
}

func (m *Model) endpointByName(name string) *hns.Endpoint {
	for _, e := range m.endpoints {
		if e.Name == name {
			return e
		}
	}
	return nil
}

func (m *Model) CreateEndpoint(ctx context.Context, e hns.Endpoint) (hns.Endpoint, error) {
	if err := m.enter(ctx, "CreateEndpoint"); err != nil {
		return hns.Endpoint{}, err
	}
	defer m.mu.Unlock()
	if m.networks[e.NetworkID] == nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: network %s: %w", e.Name, e.NetworkID, hns.ErrNotFound)
	}
	if m.endpointByName(e.Name) != nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", e.Name, hns.ErrExists)
	}
	e = cloneEndpoint(e)
	e.ID = m.newID()
	e.Namespace = ""
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
	if e.Namespace != "" {
		delete(m.ifaces, hns.HostVNIC(e.Name))
	}
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
	if !m.namespaces[namespaceID] {
		return fmt.Errorf("attaching endpoint %q to namespace %s: namespace %w", e.Name, namespaceID, hns.ErrNotFound)
	}
	switch e.Namespace {
	case namespaceID:
		return nil
	case "":
	default:
		return fmt.Errorf("attaching endpoint %q to namespace %s: attached to %s: %w", e.Name, namespaceID, e.Namespace, hns.ErrExists)
	}
	e.Namespace = namespaceID
	// The endpoint's vNIC appears in the namespace's compartment: the host's for the
	// host namespace, the pod's otherwise (found by alias in every compartment).
	m.seq++
	name := hns.HostVNIC(e.Name)
	m.ifaces[name] = &hns.Interface{Name: name, Index: m.seq, MAC: e.MAC, IPConfig: hns.IPConfig{MTU: 1500}}
	return nil
}

func (m *Model) Detach(ctx context.Context, namespaceID, endpointID string) error {
	if err := m.enter(ctx, "Detach"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	e := m.endpoints[endpointID]
	if e == nil || e.Namespace != namespaceID {
		return nil
	}
	delete(m.ifaces, hns.HostVNIC(e.Name))
	e.Namespace = ""
	return nil
}

func (m *Model) HostNamespace(ctx context.Context) (string, error) {
	if err := m.enter(ctx, "HostNamespace"); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	return m.hostNS, nil
}

func (m *Model) Interface(ctx context.Context, name string) (hns.Interface, error) {
	if err := m.enter(ctx, "Interface"); err != nil {
		return hns.Interface{}, err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil {
		return hns.Interface{}, fmt.Errorf("interface %q: %w", name, hns.ErrNotFound)
	}
	return cloneInterface(*i), nil
}

func (m *Model) Configure(ctx context.Context, name string, c hns.IPConfig) error {
	if err := m.enter(ctx, "Configure"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	i := m.ifaces[name]
	if i == nil {
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
	return n
}

func cloneEndpoint(e hns.Endpoint) hns.Endpoint {
	e.MAC = slices.Clone(e.MAC)
	e.IPs = slices.Clone(e.IPs)
	e.DNS.Servers = slices.Clone(e.DNS.Servers)
	e.DNS.Search = slices.Clone(e.DNS.Search)
	return e
}

var (
	_ hns.HNS      = (*Model)(nil)
	_ hns.IPHelper = (*Model)(nil)
	_ hns.System   = (*Model)(nil)
)
