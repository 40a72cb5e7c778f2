package hostnet

// The Windows host: HNS endpoints on a Transparent network whose vSwitch runs the Open
// vSwitch extension. The logic is OS-neutral on purpose: it talks to HNS and the IP Helper
// API only through node/hns's interfaces, so the same code runs on Windows over
// hcn (hostnet_windows.go) and on Linux in tests over hnstest.Model.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/node/hns"
)

// TransparentConfig tunes the Windows host; zero values take the defaults.
type TransparentConfig struct {
	// Network is the HNS network's name, "ovn-transparent" by default.
	Network string
	// ExtensionID is the vSwitch extension to enable, the OVS extension by default.
	ExtensionID string
	// IPMoveTimeout bounds the wait for HNS to move the adapter's IP configuration to the
	// host vNIC after creating the network (1 minute by default); past it the node
	// restores the saved configuration itself.
	IPMoveTimeout time.Duration
	// DeleteTimeout bounds one endpoint deletion (HNS can hang there), 20s by default.
	DeleteTimeout time.Duration
	// Poll is how often a bounded wait re-reads HNS or the host (200ms by default).
	Poll time.Duration
	// StateDir, if set, keeps the adapter's IP configuration saved before creating the
	// network until the host vNIC holds it, so an agent that dies in between can still
	// restore it after its restart.
	StateDir string
	Log      logr.Logger
}

// Collector is implemented by hosts whose pod interfaces can outlive their switch port (on
// Windows an HNS endpoint whose deletion hung): CNI GC and the agent's own collector ask it
// to remove every pod interface for which keep (given the host interface name, see
// HostIfName) is false. It returns how many it removed.
type Collector interface {
	CollectPodInterfaces(ctx context.Context, keep func(name string) bool) (int, error)
}

// Transparent is the Windows Host.
type Transparent struct {
	hns hns.HNS
	ip  hns.IPHelper
	sys hns.System
	cfg TransparentConfig

	mu      sync.Mutex
	network hns.Network // set once SetupUplink has created or adopted it
}

var (
	_ Host      = (*Transparent)(nil)
	_ Collector = (*Transparent)(nil)
)

// NewTransparent returns the Windows host over h, ip and sys.
func NewTransparent(h hns.HNS, ip hns.IPHelper, sys hns.System, cfg TransparentConfig) *Transparent {
	if cfg.Network == "" {
		cfg.Network = "ovn-transparent"
	}
	if cfg.ExtensionID == "" {
		cfg.ExtensionID = hns.OVSExtensionID
	}
	if cfg.IPMoveTimeout == 0 {
		cfg.IPMoveTimeout = time.Minute
	}
	if cfg.DeleteTimeout == 0 {
		cfg.DeleteTimeout = 20 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	return &Transparent{hns: h, ip: ip, sys: sys, cfg: cfg}
}

// windowsPortType: pods' and the management port's vSwitch ports are "internal" to OVS on
// Windows; the extension binds an internal interface to the Hyper-V port of the same name,
// which must exist by then (see LateBinder).
const windowsPortType = "internal"

var (
	_ LateBinder     = (*Transparent)(nil)
	_ Volatile       = (*Transparent)(nil)
	_ InterfaceFirst = (*Transparent)(nil)
)

func (t *Transparent) interfaceFirst() {}

// PodInterfaceExists reports whether the endpoint called name exists in HNS; an HNS that
// does not answer within DeleteTimeout is an error (the answer is unknown).
func (t *Transparent) PodInterfaceExists(ctx context.Context, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DeleteTimeout)
	defer cancel()
	_, err := t.hns.Endpoint(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, hns.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("HNS endpoint %s: %w", name, err)
}

var _ SubnetHolder = (*Transparent)(nil)

// KnownPodSubnet returns the static IPAM subnet of the HNS network, if it exists, is
// Transparent and has exactly one.
func (t *Transparent) KnownPodSubnet(ctx context.Context) (netip.Prefix, bool, error) {
	n, err := t.hns.Network(ctx, t.cfg.Network)
	switch {
	case errors.Is(err, hns.ErrNotFound):
		return netip.Prefix{}, false, nil
	case err != nil:
		return netip.Prefix{}, false, fmt.Errorf("HNS network %q: %w", t.cfg.Network, err)
	case n.Type != hns.TypeTransparent || len(n.Subnets) != 1:
		return netip.Prefix{}, false, nil
	}
	return n.Subnets[0].Prefix, true, nil
}

// SetupUplink creates the Transparent network on u.Iface, or adopts it after a restart,
// makes sure the node's address is on the host vNIC, enables the OVS extension, and then
// (only then: enabling it earlier can lose a DHCP address being moved) puts the adapter and
// the host vNIC into u.Bridge.
func (t *Transparent) SetupUplink(ctx context.Context, u Uplink) (NodeAddress, error) {
	if u.Iface == "" {
		return NodeAddress{}, errors.New("Windows nodes need the physical adapter to bind the Transparent network to (--uplink-interface)")
	}
	if !u.PodSubnet.IsValid() {
		return NodeAddress{}, errors.New("the Transparent network needs the node's pod subnet")
	}
	// Once the network exists, the adapter is the vSwitch's: IP Helper no longer lists it
	// (the vSwitch unbinds IP from it), so it is never needed again.
	// An HNS that does not answer (the Containers feature missing?) is for the preflight
	// checks to explain; ensureNetwork reports its error otherwise.
	existing, err := t.hns.Network(ctx, t.cfg.Network)
	bound := err == nil && existing.Type == hns.TypeTransparent && existing.Adapter == u.Iface
	warnings, err := hns.Preflight(ctx, t.sys, t.ip, u.Iface, bound)
	for _, w := range warnings {
		t.cfg.Log.Info("preflight warning", "warning", w)
	}
	if err != nil {
		return NodeAddress{}, err
	}
	n, err := t.ensureNetwork(ctx, u.Iface, []hns.Subnet{{Prefix: u.PodSubnet.Masked(), Gateway: u.PodSubnetRouter}})
	if err != nil {
		return NodeAddress{}, err
	}
	if !slices.Contains(n.Extensions, strings.ToUpper(t.cfg.ExtensionID)) {
		if err := t.hns.EnableExtension(ctx, n.ID, t.cfg.ExtensionID); err != nil {
			return NodeAddress{}, fmt.Errorf("enabling the OVS extension on network %q: %w", n.Name, err)
		}
	}
	t.mu.Lock()
	t.network = n
	t.mu.Unlock()

	// The bound adapter is not visible to IP Helper now; the host vNIC carries its MAC
	// (a Transparent network's host vNIC takes the adapter's), which is all the bridge
	// needs of it.
	vnicName, hostPort := hns.HostVNIC(u.Iface), ""
	vnic, err := t.ip.Interface(ctx, vnicName)
	if err != nil {
		return NodeAddress{}, fmt.Errorf("host vNIC: %w", err)
	}
	if err := u.Attach(ctx, vnic.MAC); err != nil {
		return NodeAddress{}, fmt.Errorf("adding adapter %q to %s: %w", u.Iface, u.Bridge, err)
	}
	if u.AttachHostPort != nil {
		if err := u.AttachHostPort(ctx, vnicName); err != nil {
			return NodeAddress{}, fmt.Errorf("adding %q to %s: %w", vnicName, u.Bridge, err)
		}
		hostPort = vnicName
	}
	// The host vNIC takes the answers to pods from the management vNIC's side (see
	// SetupManagementPort) and forwards between the two. The setting does not survive
	// the vNIC, which a reboot re-creates: it is made at every start.
	if err := t.ip.SetForwarding(ctx, vnicName); err != nil {
		return NodeAddress{}, fmt.Errorf("enabling forwarding on %q: %w", vnicName, err)
	}
	ip, ok := pickAddr(vnic.Addrs, u.PreferIP)
	if !ok {
		return NodeAddress{}, fmt.Errorf("host vNIC %q has no IPv4 address", vnicName)
	}
	return NodeAddress{IfName: vnicName, IP: ip, MAC: vnic.MAC, NextHop: vnic.Gateway, HostPort: hostPort, SwitchID: n.ID}, nil
}

// ensureNetwork adopts the network if it exists (and is ours: Transparent, on adapter, with
// subnets), or creates it, and returns once the host vNIC holds the node's address.
func (t *Transparent) ensureNetwork(ctx context.Context, adapter string, subnets []hns.Subnet) (hns.Network, error) {
	vnicName := hns.HostVNIC(adapter)
	n, err := t.hns.Network(ctx, t.cfg.Network)
	if err == nil {
		if n.Type != hns.TypeTransparent || n.Adapter != adapter {
			return hns.Network{}, fmt.Errorf("HNS network %q exists as a %s network on adapter %q, not Transparent on %q: "+
				"remove it (Get-HnsNetwork | ? Name -eq %q | Remove-HnsNetwork) or fix --uplink-interface", n.Name, n.Type, n.Adapter, adapter, n.Name)
		}
		if !slices.Equal(n.Subnets, subnets) {
			// HNS cannot change a network's IPAM subnets; pods with addresses of the old
			// subnet would not work on the node anyway.
			return hns.Network{}, fmt.Errorf("HNS network %q has the subnets %v, not the node's %v (an older agent's, or the node's "+
				"subnet changed): drain the node and remove it (Get-HnsNetwork | ? Name -eq %q | Remove-HnsNetwork)", n.Name, n.Subnets, subnets, n.Name)
		}
		// After a reboot Windows restores the vNIC's configuration itself, in its own time.
		err := t.waitVNIC(ctx, vnicName, nil)
		if err != nil {
			// An agent that died between creating the network and restoring the
			// configuration left it on disk.
			saved, ok := t.loadSaved(adapter)
			if !ok {
				return hns.Network{}, fmt.Errorf("adopted network %q: %w", n.Name, err)
			}
			if err := t.restore(ctx, vnicName, saved); err != nil {
				return hns.Network{}, err
			}
		}
		t.forgetSaved(adapter)
		t.cfg.Log.Info("adopted the HNS network", "network", n.Name, "id", n.ID)
		return n, nil
	}
	if !errors.Is(err, hns.ErrNotFound) {
		return hns.Network{}, fmt.Errorf("HNS network %q: %w", t.cfg.Network, err)
	}
	a, err := t.ip.Interface(ctx, adapter)
	if err != nil {
		return hns.Network{}, fmt.Errorf("adapter %q: %w", adapter, err)
	}
	saved := a.IPConfig
	if err := t.save(adapter, saved); err != nil {
		return hns.Network{}, err
	}
	n, err = t.hns.CreateTransparentNetwork(ctx, t.cfg.Network, adapter, subnets)
	if err != nil {
		return hns.Network{}, fmt.Errorf("creating HNS network %q on %q: %w", t.cfg.Network, adapter, err)
	}
	t.cfg.Log.Info("created the HNS network", "network", n.Name, "id", n.ID, "adapter", adapter)
	if len(saved.Addrs) == 0 {
		// Nothing to restore (DHCP not answered yet?): wait for any address.
		if err := t.waitVNIC(ctx, vnicName, nil); err != nil {
			return hns.Network{}, err
		}
		t.forgetSaved(adapter)
		return n, nil
	}
	// Some builds never move the configuration, or move only the address: put back what
	// of it (address, gateway, DNS, routes) the vNIC lacks.
	if err := t.waitVNIC(ctx, vnicName, saved.Addrs); err != nil {
		t.cfg.Log.Info("HNS did not move the host's addresses in time", "vnic", vnicName, "error", err.Error())
	}
	if err := t.restore(ctx, vnicName, saved); err != nil {
		return hns.Network{}, err
	}
	t.forgetSaved(adapter)
	return n, nil
}

// restore adds to the vNIC what of the adapter's saved configuration it lacks: addresses,
// the default gateway and DNS servers if it has none, routes. It removes nothing, so an
// address HNS or DHCP gave the vNIC meanwhile stays. An address restored here is static:
// a host whose address came from DHCP keeps it as static until the lease is reconfigured
// (docs/windows.md says to reserve it).
func (t *Transparent) restore(ctx context.Context, vnic string, saved hns.IPConfig) error {
	have, err := t.ip.Interface(ctx, vnic)
	if err != nil {
		return fmt.Errorf("restoring the IP configuration on %q: %w", vnic, err)
	}
	want := hns.IPConfig{Addrs: slices.Clone(have.Addrs), Gateway: have.Gateway, DNS: slices.Clone(have.DNS), Routes: slices.Clone(have.Routes)}
	for _, a := range saved.Addrs {
		if !slices.Contains(want.Addrs, a) {
			want.Addrs = append(want.Addrs, a)
		}
	}
	if !want.Gateway.IsValid() {
		want.Gateway = saved.Gateway
	}
	if len(want.DNS) == 0 {
		want.DNS = slices.Clone(saved.DNS)
	}
	for _, r := range saved.Routes {
		if !slices.Contains(want.Routes, r) {
			want.Routes = append(want.Routes, r)
		}
	}
	if len(want.Addrs) == len(have.Addrs) && want.Gateway == have.Gateway && len(want.DNS) == len(have.DNS) && len(want.Routes) == len(have.Routes) {
		return nil
	}
	t.cfg.Log.Info("restoring the host's IP configuration HNS did not move", "vnic", vnic, "have", have.IPConfig, "restored", want)
	if err := t.ip.Configure(ctx, vnic, want); err != nil {
		return fmt.Errorf("restoring the IP configuration on %q: %w", vnic, err)
	}
	return nil
}

func (t *Transparent) savedPath(adapter string) string {
	return filepath.Join(t.cfg.StateDir, "uplink-"+url.PathEscape(adapter)+".json")
}

// save writes the adapter's configuration to StateDir (if set) before the network exists.
func (t *Transparent) save(adapter string, c hns.IPConfig) error {
	if t.cfg.StateDir == "" {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(t.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("saving the configuration of %q: %w", adapter, err)
	}
	if err := os.WriteFile(t.savedPath(adapter), b, 0o600); err != nil {
		return fmt.Errorf("saving the configuration of %q: %w", adapter, err)
	}
	return nil
}

func (t *Transparent) loadSaved(adapter string) (hns.IPConfig, bool) {
	var c hns.IPConfig
	if t.cfg.StateDir == "" {
		return c, false
	}
	b, err := os.ReadFile(t.savedPath(adapter))
	if err != nil || json.Unmarshal(b, &c) != nil || len(c.Addrs) == 0 {
		return c, false
	}
	return c, true
}

func (t *Transparent) forgetSaved(adapter string) {
	if t.cfg.StateDir != "" {
		os.Remove(t.savedPath(adapter))
	}
}

// waitVNIC waits, within IPMoveTimeout, until the interface exists and holds every address
// in want (any IPv4 address if want is empty).
func (t *Transparent) waitVNIC(ctx context.Context, name string, want []netip.Prefix) error {
	var last error
	err := t.poll(ctx, t.cfg.IPMoveTimeout, func(ctx context.Context) bool {
		i, err := t.ip.Interface(ctx, name)
		if err != nil {
			last = err
			return false
		}
		if len(want) == 0 {
			_, ok := pickAddr(i.Addrs, netip.Addr{})
			last = fmt.Errorf("%q has no IPv4 address", name)
			return ok
		}
		for _, w := range want {
			if !slices.Contains(i.Addrs, w) {
				last = fmt.Errorf("%q lacks %s", name, w)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the host vNIC: %w (last: %v)", err, last)
	}
	return nil
}

// poll calls cond every Poll until it is true, for at most timeout.
func (t *Transparent) poll(ctx context.Context, timeout time.Duration, cond func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		if cond(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func pickAddr(addrs []netip.Prefix, prefer netip.Addr) (netip.Prefix, bool) {
	for _, a := range addrs {
		if prefer.IsValid() && a.Addr() == prefer {
			return a, true
		}
	}
	for _, a := range addrs {
		if a.Addr().Is4() {
			return a, true
		}
	}
	return netip.Prefix{}, false
}

// net returns the network SetupUplink set up, or looks it up (CNI may be served by an agent
// that has just restarted and not finished start-up).
func (t *Transparent) net(ctx context.Context) (hns.Network, error) {
	t.mu.Lock()
	n := t.network
	t.mu.Unlock()
	if n.ID != "" {
		return n, nil
	}
	n, err := t.hns.Network(ctx, t.cfg.Network)
	if err != nil {
		return hns.Network{}, fmt.Errorf("HNS network %q: %w", t.cfg.Network, err)
	}
	return n, nil
}

func (t *Transparent) podEndpoint(n hns.Network, p PodInterface) hns.Endpoint {
	e := hns.Endpoint{Name: p.HostIfName, NetworkID: n.ID, MAC: p.MAC, IPs: p.IPs,
		DNS: hns.DNS{Servers: p.DNS.Servers, Search: p.DNS.Search}}
	if len(p.Gateways) > 0 {
		e.Gateway = p.Gateways[0]
	}
	for _, r := range p.Routes {
		e.Routes = append(e.Routes, hns.Route{Dst: r.Dest, NextHop: r.NextHop})
	}
	return e
}

// endpointDiff names the first way have differs from want, or returns "".
func endpointDiff(have, want hns.Endpoint) string {
	switch {
	case have.NetworkID != want.NetworkID:
		return fmt.Sprintf("network %s, want %s", have.NetworkID, want.NetworkID)
	case have.MAC.String() != want.MAC.String():
		return fmt.Sprintf("MAC %s, want %s", have.MAC, want.MAC)
	case !slices.Equal(have.IPs, want.IPs):
		return fmt.Sprintf("addresses %v, want %v", have.IPs, want.IPs)
	case !slices.Equal(have.Routes, want.Routes):
		return fmt.Sprintf("routes %v, want %v", have.Routes, want.Routes)
	}
	return ""
}

// CreatePodInterface creates the pod's HNS endpoint, named p.HostIfName (the OVS port gets
// the same name), with the master's IP and MAC, and attaches it to the HCN namespace in
// p.Netns. A repeated ADD finds the endpoint and reuses it.
func (t *Transparent) CreatePodInterface(ctx context.Context, p PodInterface) (Attached, error) {
	n, err := t.net(ctx)
	if err != nil {
		return Attached{}, err
	}
	want := t.podEndpoint(n, p)
	att := Attached{HostIfName: p.HostIfName, HostMAC: p.MAC}
	ep, err := t.hns.Endpoint(ctx, p.HostIfName)
	if err == nil {
		if d := endpointDiff(ep, want); d != "" {
			return Attached{}, fmt.Errorf("HNS endpoint %s exists with %s", ep.Name, d)
		}
		if err := t.hns.Attach(ctx, p.Netns, ep.ID); err != nil {
			return Attached{}, fmt.Errorf("attaching HNS endpoint %s to namespace %s: %w", ep.Name, p.Netns, err)
		}
		return att, nil
	}
	if !errors.Is(err, hns.ErrNotFound) {
		return Attached{}, fmt.Errorf("HNS endpoint %s: %w", p.HostIfName, err)
	}
	ep, err = t.hns.CreateEndpoint(ctx, want)
	if err != nil {
		return Attached{}, fmt.Errorf("creating HNS endpoint %s: %w", p.HostIfName, err)
	}
	success := false
	defer func() {
		if !success {
			t.deleteEndpoint(context.WithoutCancel(ctx), ep)
		}
	}()
	if err := t.hns.Attach(ctx, p.Netns, ep.ID); err != nil {
		return Attached{}, fmt.Errorf("attaching HNS endpoint %s to namespace %s: %w", ep.Name, p.Netns, err)
	}
	success = true
	att.Created = true
	return att, nil
}

// AwaitPodInterface waits for the pod's vNIC "vEthernet (<endpoint>)", which appears in the
// pod's compartment when the runtime starts the sandbox, after ADD; then sets its MTU, which
// only the IP stack can (OVS's mtu_request does nothing on Windows: netdev-windows has no
// set_mtu), and returns "internal", the type the endpoint's OVS port takes now that the
// Hyper-V port of its name exists.
func (t *Transparent) AwaitPodInterface(ctx context.Context, ref PodRef, mtu int) (string, error) {
	name := hns.HostVNIC(ref.HostIfName)
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		// The vNIC is in the pod's network compartment, which the agent's (the host's)
		// look-ups do not see.
		v, err := t.ip.PodVNIC(ctx, name)
		if err == nil {
			if mtu > 0 && v.MTU != mtu {
				if err := t.ip.SetMTU(ctx, name, mtu); err != nil {
					return "", fmt.Errorf("MTU of %q: %w", name, err)
				}
			}
			return windowsPortType, nil
		}
		if !errors.Is(err, hns.ErrNotFound) {
			return "", fmt.Errorf("pod vNIC %q: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the pod vNIC %q: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// CheckPodInterface checks the endpoint exists as p wants and is in p's namespace.
func (t *Transparent) CheckPodInterface(ctx context.Context, p PodInterface) error {
	n, err := t.net(ctx)
	if err != nil {
		return err
	}
	ep, err := t.hns.Endpoint(ctx, p.HostIfName)
	if err != nil {
		return fmt.Errorf("HNS endpoint %s: %w", p.HostIfName, err)
	}
	if d := endpointDiff(ep, t.podEndpoint(n, p)); d != "" {
		return fmt.Errorf("HNS endpoint %s has %s", ep.Name, d)
	}
	if !strings.EqualFold(ep.Namespace, p.Netns) { // GUIDs: HNS may change their case
		return fmt.Errorf("HNS endpoint %s is in namespace %q, want %q", ep.Name, ep.Namespace, p.Netns)
	}
	return nil
}

// DeletePodInterface detaches and deletes the pod's endpoint; nil if it is gone. A
// deletion HNS does not finish within DeleteTimeout is logged and left to the agent's leak
// collector or CNI GC (CollectPodInterfaces), so one hung endpoint does not block the
// runtime's sandbox removal.
func (t *Transparent) DeletePodInterface(ctx context.Context, ref PodRef) error {
	lctx, cancel := context.WithTimeout(ctx, t.cfg.DeleteTimeout)
	ep, err := t.hns.Endpoint(lctx, ref.HostIfName)
	cancel()
	switch {
	case errors.Is(err, hns.ErrNotFound):
		return nil
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		t.cfg.Log.Info("HNS did not answer in time; the agent's collector will retry", "endpoint", ref.HostIfName, "timeout", t.cfg.DeleteTimeout)
		return nil
	case err != nil:
		return fmt.Errorf("HNS endpoint %s: %w", ref.HostIfName, err)
	}
	return t.deleteEndpoint(ctx, ep)
}

// deleteEndpoint detaches and deletes ep within DeleteTimeout. A timeout is not an error.
func (t *Transparent) deleteEndpoint(ctx context.Context, ep hns.Endpoint) error {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DeleteTimeout)
	defer cancel()
	err := func() error {
		// HNS reports an unattached endpoint in the all-zero namespace and refuses to
		// remove it from there.
		if ep.Attached() {
			if err := t.hns.Detach(dctx, ep.Namespace, ep.ID); err != nil {
				return fmt.Errorf("detaching HNS endpoint %s: %w", ep.Name, err)
			}
		}
		if err := t.hns.DeleteEndpoint(dctx, ep.ID); err != nil {
			return fmt.Errorf("deleting HNS endpoint %s: %w", ep.Name, err)
		}
		return nil
	}()
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		t.cfg.Log.Info("HNS did not finish deleting an endpoint in time; the agent's collector will retry", "endpoint", ep.Name, "timeout", t.cfg.DeleteTimeout)
		return nil
	}
	return err
}

// CollectPodInterfaces deletes the pod endpoints (named by HostIfName) on the network that
// keep refuses. The management port's endpoint is not a pod's and stays.
func (t *Transparent) CollectPodInterfaces(ctx context.Context, keep func(name string) bool) (int, error) {
	n, err := t.net(ctx)
	if err != nil {
		return 0, err
	}
	eps, err := t.hns.ListEndpoints(ctx, n.ID)
	if err != nil {
		return 0, fmt.Errorf("listing the endpoints of network %q: %w", n.Name, err)
	}
	var errs []error
	removed := 0
	for _, ep := range eps {
		if !IsPodIfName(ep.Name) || keep(ep.Name) {
			continue
		}
		if err := t.deleteEndpoint(ctx, ep); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
		t.cfg.Log.Info("removed a stale HNS endpoint", "endpoint", ep.Name)
	}
	return removed, errors.Join(errs...)
}

// SetupManagementPort gives the node its interface into the pod network: an HNS endpoint
// named m.IfName with the management MAC and IP, attached to the host namespace; once its
// host vNIC exists (and with it the Hyper-V port OVS binds by that name), the OVS internal
// port of the same name (m.AddPort); then the vNIC gets the address, the routes to the
// cluster and service ranges through m.Gateway, and the MTU. A subnet change replaces the
// endpoint, with the OVS port out of the bridge meanwhile.
func (t *Transparent) SetupManagementPort(ctx context.Context, m ManagementPort) error {
	n, err := t.net(ctx)
	if err != nil {
		return err
	}
	host, err := t.hns.HostNamespace(ctx)
	if errors.Is(err, hns.ErrNotFound) {
		// Some hosts list no default namespace until one is created.
		host, err = t.hns.CreateHostNamespace(ctx)
	}
	if err != nil {
		return fmt.Errorf("host namespace: %w", err)
	}
	want := hns.Endpoint{Name: m.IfName, NetworkID: n.ID, MAC: m.MAC, IPs: []netip.Prefix{m.IP}}
	ep, err := t.hns.Endpoint(ctx, m.IfName)
	switch {
	case err == nil && endpointDiff(ep, want) != "":
		t.cfg.Log.Info("replacing the management endpoint", "endpoint", ep.Name, "change", endpointDiff(ep, want))
		// The endpoint goes first: OVS removing its internal port would delete the
		// endpoint's Hyper-V port from under HNS.
		if err := t.deleteEndpoint(ctx, ep); err != nil {
			return err
		}
		if _, err := t.hns.Endpoint(ctx, m.IfName); err == nil {
			return fmt.Errorf("the old management endpoint %s is not deleted yet (HNS did not finish); retrying later", m.IfName)
		}
		if err := m.RemovePort(ctx); err != nil {
			return fmt.Errorf("removing the management port from the switch: %w", err)
		}
		fallthrough
	case errors.Is(err, hns.ErrNotFound):
		if ep, err = t.hns.CreateEndpoint(ctx, want); err != nil {
			return fmt.Errorf("creating the management endpoint %s: %w", m.IfName, err)
		}
	case err != nil:
		return fmt.Errorf("management endpoint %s: %w", m.IfName, err)
	}
	if err := t.hns.Attach(ctx, host, ep.ID); err != nil {
		return fmt.Errorf("attaching the management endpoint %s to the host: %w", m.IfName, err)
	}
	vnic := hns.HostVNIC(m.IfName)
	var last error
	err = t.poll(ctx, t.cfg.IPMoveTimeout, func(ctx context.Context) bool {
		_, last = t.ip.Interface(ctx, vnic)
		return last == nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the management vNIC %q: %w (last: %v)", vnic, err, last)
	}
	if err := m.AddPort(ctx); err != nil {
		return fmt.Errorf("adding the management port to the switch: %w", err)
	}
	c := hns.IPConfig{Addrs: []netip.Prefix{m.IP}, MTU: m.MTU}
	for _, r := range m.Routes {
		c.Routes = append(c.Routes, hns.Route{Dst: r, NextHop: m.Gateway})
	}
	if err := t.ip.Configure(ctx, vnic, c); err != nil {
		return fmt.Errorf("configuring %q: %w", vnic, err)
	}
	// A pod's packet to the node IP arrives here for an address of the host vNIC, and
	// the answer leaves here from it: Windows' strong host model drops both unless this
	// vNIC forwards (the host vNIC forwards too, SetupUplink). Antrea enables forwarding
	// the same way.
	if err := t.ip.SetForwarding(ctx, vnic); err != nil {
		return fmt.Errorf("enabling forwarding on %q: %w", vnic, err)
	}
	return nil
}

// IsPodIfName reports whether name is one HostIfName makes.
func IsPodIfName(name string) bool {
	return len(name) == len("ovt")+12 && strings.HasPrefix(name, "ovt")
}
