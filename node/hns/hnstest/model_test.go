package hnstest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hns"
)

var (
	adapterMAC, _ = net.ParseMAC("00:15:5d:00:00:01")
	hostCfg       = hns.IPConfig{
		Addrs: []netip.Prefix{netip.MustParsePrefix("172.18.0.5/24")}, Gateway: netip.MustParseAddr("172.18.0.254"),
		DNS: []netip.Addr{netip.MustParseAddr("172.18.0.53")}, MTU: 1500,
	}
)

func newHost(t *testing.T) *Model {
	t.Helper()
	m := NewModel()
	m.AddAdapter("Ethernet0", adapterMAC, true, hostCfg)
	m.AddAdapter("vEthernet (nat)", adapterMAC, false, hns.IPConfig{})
	return m
}

func TestTransparentNeedsPhysicalAdapter(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "vEthernet (nat)", nil); !errors.Is(err, hns.ErrVirtualAdapter) {
		t.Fatalf("virtual adapter: %v, want hns.ErrVirtualAdapter", err)
	}
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet9", nil); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("missing adapter: %v, want hns.ErrNotFound", err)
	}
	if n := m.Networks(); len(n) != 0 {
		t.Fatalf("networks after refusals: %v", n)
	}
}

// HNS does not keep names unique; one adapter serves one network.
func TestNamesNotUnique(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	m.AddAdapter("Ethernet1", adapterMAC, true, hns.IPConfig{})
	first, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTransparentNetwork(ctx, "other", "Ethernet0", nil); !errors.Is(err, hns.ErrExists) {
		t.Fatalf("second network on the same adapter: %v, want hns.ErrExists", err)
	}
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet1", nil); err != nil {
		t.Fatalf("second network of the same name: %v, want it created", err)
	}
	if n, err := m.Network(ctx, "ovnt"); err != nil || n.ID != first.ID {
		t.Errorf("look-up by name: %+v (%v), want the first network", n, err)
	}
	ep, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: first.ID}); err != nil {
		t.Fatalf("second endpoint of the same name: %v, want it created", err)
	}
	for range 5 {
		if got, err := m.Endpoint(ctx, "ep"); err != nil || got.ID != ep.ID {
			t.Fatalf("look-up by name: %+v (%v), want the first endpoint", got, err)
		}
	}
}

func TestIPMovesAfterDelay(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	m.IPMoveDelay = 300 * time.Millisecond
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil); err != nil {
		t.Fatal(err)
	}
	a, _ := m.Interface(ctx, "Ethernet0")
	v, _ := m.Interface(ctx, hns.HostVNIC("Ethernet0"))
	if len(a.Addrs) != 0 || len(v.Addrs) != 0 {
		t.Fatalf("right after creation: adapter %v vNIC %v, want both empty", a.Addrs, v.Addrs)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, _ = m.Interface(ctx, hns.HostVNIC("Ethernet0"))
		if len(v.Addrs) == 1 && v.Addrs[0] == hostCfg.Addrs[0] && v.Gateway == hostCfg.Gateway && len(v.DNS) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the vNIC never got the adapter's configuration: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v.MAC.String() != adapterMAC.String() || v.Physical {
		t.Fatalf("vNIC: %+v, want the adapter's MAC and virtual", v)
	}
}

func TestExtensionBeforeMoveLosesAddress(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	m.IPMoveDelay = 100 * time.Millisecond
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EnableExtension(ctx, n.ID, strings.ToLower(hns.OVSExtensionID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	v, _ := m.Interface(ctx, hns.HostVNIC("Ethernet0"))
	if len(v.Addrs) != 0 {
		t.Fatalf("vNIC addresses %v, want lost", v.Addrs)
	}
	got, _ := m.Network(ctx, "ovnt")
	if len(got.Extensions) != 1 || got.Extensions[0] != hns.OVSExtensionID {
		t.Fatalf("extensions %v", got.Extensions)
	}
}

func TestEndpointRules(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: "nope"}); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("endpoint without network: %v", err)
	}
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	ns := m.AddNamespace()
	if err := m.Attach(ctx, ns, "missing"); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("attach of a missing endpoint: %v", err)
	}
	if err := m.Attach(ctx, "missing", ep.ID); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("attach to a missing namespace: %v", err)
	}
	for range 2 {
		if err := m.Attach(ctx, ns, ep.ID); err != nil {
			t.Fatalf("attach (idempotent): %v", err)
		}
	}
	other := m.AddNamespace()
	if err := m.Attach(ctx, other, ep.ID); err == nil {
		t.Fatal("attach to a second namespace succeeded")
	}
	if err := m.DeleteNetwork(ctx, n.ID); !errors.Is(err, hns.ErrInUse) {
		t.Fatalf("deleting a network with endpoints: %v", err)
	}
	if err := m.Detach(ctx, ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.DeleteEndpoint(ctx, ep.ID); err != nil {
			t.Fatalf("delete (idempotent): %v", err)
		}
	}
	if err := m.DeleteNetwork(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
}

func TestHostNamespaceMakesVNIC(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	n, _ := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	mac, _ := net.ParseMAC("0a:58:0a:f4:01:02")
	ep, _ := m.CreateEndpoint(ctx, hns.Endpoint{Name: "k8s-win1", NetworkID: n.ID, MAC: mac})
	host, _ := m.HostNamespace(ctx)
	if err := m.Attach(ctx, host, ep.ID); err != nil {
		t.Fatal(err)
	}
	if v, ok := m.InterfaceNow(hns.HostVNIC("k8s-win1")); !ok || v.MAC.String() != mac.String() {
		t.Fatalf("host vNIC %+v %v", v, ok)
	}
	if err := m.DeleteEndpoint(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.InterfaceNow(hns.HostVNIC("k8s-win1")); ok {
		t.Fatal("host vNIC outlived its endpoint")
	}
}

func TestFaults(t *testing.T) {
	m := newHost(t)
	boom := errors.New("boom")
	m.Fail("Network", boom)
	if _, err := m.Network(context.Background(), "x"); !errors.Is(err, boom) {
		t.Fatalf("injected failure: %v", err)
	}
	m.Heal("Network")
	m.Hang("Network")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Network(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung call: %v", err)
	}
	m.Heal("Network")
	if _, err := m.Network(context.Background(), "x"); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("healed: %v", err)
	}
	if c := m.Calls(); len(c) != 3 || c[0] != "Network" {
		t.Fatalf("calls %v", c)
	}
}

func TestPreflight(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	if w, err := hns.Preflight(ctx, m, m, "Ethernet0", false); err != nil || len(w) != 0 {
		t.Fatalf("healthy host: %v %v", w, err)
	}
	m.SetFeatures(hns.Features{VirtualMachine: true})
	w, err := hns.Preflight(ctx, m, m, "vEthernet (nat)", false)
	if err == nil {
		t.Fatal("preflight passed without features on a virtual adapter")
	}
	for _, want := range []string{"Hyper-V", "Containers", "Open vSwitch", "physical adapter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("preflight error does not mention %q: %v", want, err)
		}
	}
	if !errors.Is(err, hns.ErrVirtualAdapter) {
		t.Errorf("preflight error is not ErrVirtualAdapter: %v", err)
	}
	if len(w) != 1 || !strings.Contains(w[0], "MacAddressSpoofing") {
		t.Errorf("warnings %v, want MAC spoofing", w)
	}
}

// withEndpoint creates the network "ovnt" on Ethernet0 and an endpoint called name on it.
func withEndpoint(t *testing.T, m *Model, name string) (hns.Network, hns.Endpoint) {
	t.Helper()
	ctx := context.Background()
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: name, NetworkID: n.ID, MAC: adapterMAC})
	if err != nil {
		t.Fatal(err)
	}
	return n, ep
}

// podHost is newHost with the network created, the OVS extension enabled and one pod
// endpoint "ovt1" attached to a sandbox that has not started.
func podHost(t *testing.T) (m *Model, ns string, ep hns.Endpoint) {
	t.Helper()
	ctx := context.Background()
	m = newHost(t)
	n, ep := withEndpoint(t, m, "ovt1")
	if err := m.EnableExtension(ctx, n.ID, hns.OVSExtensionID); err != nil {
		t.Fatal(err)
	}
	ns = m.AddNamespace()
	if err := m.Attach(ctx, ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	return m, ns, ep
}

// containerd runs ADD before it starts the sandbox: the pod's vNIC appears only then.
func TestPodVNICAppearsWhenSandboxStarts(t *testing.T) {
	m, ns, _ := podHost(t)
	if _, ok := m.InterfaceNow(hns.HostVNIC("ovt1")); ok {
		t.Fatal("the pod's vNIC exists before its sandbox started")
	}
	if err := m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	v, ok := m.InterfaceNow(hns.HostVNIC("ovt1"))
	if !ok || v.MTU != 1500 {
		t.Fatalf("after the sandbox started: vNIC %+v (%v), want it with MTU 1500", v, ok)
	}
	// It is in the pod's compartment: the host's look-up does not see it.
	ctx := context.Background()
	if _, err := m.Interface(ctx, hns.HostVNIC("ovt1")); !errors.Is(err, hns.ErrNotFound) {
		t.Errorf("Interface found the pod's vNIC (%v); it reads the host's compartment only", err)
	}
	if p, err := m.PodVNIC(ctx, hns.HostVNIC("ovt1")); err != nil || p.MTU != 1500 {
		t.Errorf("PodVNIC: %+v (%v)", p, err)
	}
	if err := m.StartSandbox("nope"); !errors.Is(err, hns.ErrNotFound) {
		t.Errorf("starting a missing sandbox: %v, want hns.ErrNotFound", err)
	}
}

// An internal OVS interface added before the endpoint's vNIC exists binds a host vNIC OVS
// makes itself; the real vNIC, when it comes, is not bound and its frames are dropped.
func TestOVSInternalBeforeVNICBindsItsOwn(t *testing.T) {
	m, ns, _ := podHost(t)
	m.Reconfigure(map[string]string{"ovt1": "internal"}, true)
	if b, ok := m.OVSBinding("ovt1"); !ok || !b.ByOVS || b.Endpoint != "" {
		t.Fatalf("binding %+v (%v), want OVS's own port", b, ok)
	}
	if err := m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	m.Reconfigure(map[string]string{"ovt1": "internal"}, true)
	if b, _ := m.OVSBinding("ovt1"); !b.ByOVS {
		t.Errorf("after the real vNIC appeared the binding moved to %+v; OVS keeps the first port", b)
	}
	if m.Forwards("ovt1") {
		t.Error("the pod's vNIC forwards though OVS bound another port")
	}
}

// With the vNIC there first, an internal interface binds it; one of type "" does not (it
// binds only the physical adapter), and removing the internal interface deletes the
// Hyper-V port, the endpoint's vNIC with it.
func TestOVSBindsEndpointVNIC(t *testing.T) {
	m, ns, _ := podHost(t)
	if err := m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	m.Reconfigure(map[string]string{"ovt1": "", "Ethernet0": ""}, true)
	if b, ok := m.OVSBinding("ovt1"); ok {
		t.Errorf("type \"\" bound %+v, want nothing", b)
	}
	if b, ok := m.OVSBinding("Ethernet0"); !ok || b.Port != "Ethernet0" {
		t.Errorf("the adapter: %+v (%v), want bound", b, ok)
	}
	if m.Forwards("ovt1") {
		t.Error("frames of an unbound vNIC forwarded")
	}
	m.Reconfigure(map[string]string{"ovt1": "internal", "Ethernet0": ""}, true)
	if b, ok := m.OVSBinding("ovt1"); !ok || b.ByOVS || b.Endpoint != "ovt1" {
		t.Fatalf("binding %+v (%v), want the endpoint's vNIC", b, ok)
	}
	if !m.Forwards("ovt1") {
		t.Error("the bound vNIC does not forward")
	}
	m.Reconfigure(map[string]string{"Ethernet0": ""}, true)
	if _, ok := m.InterfaceNow(hns.HostVNIC("ovt1")); ok {
		t.Error("removing the internal OVS interface left the endpoint's vNIC")
	}
	if got := m.HyperVPorts(); slices.Contains(got, "ovt1") {
		t.Errorf("Hyper-V ports %v after the OVS interface went", got)
	}
}

// A static endpoint address must lie in a subnet of the network (H3 of the Windows review).
func TestStaticAddressNeedsSubnet(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	ip := netip.MustParsePrefix("10.244.1.7/24")
	bare, err := m.CreateTransparentNetwork(ctx, "bare", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: bare.ID, IPs: []netip.Prefix{ip}}); !errors.Is(err, hns.ErrNoSubnet) {
		t.Fatalf("static address on a network without a subnet: %v, want hns.ErrNoSubnet", err)
	}
	if err := m.DeleteNetwork(ctx, bare.ID); err != nil {
		t.Fatal(err)
	}
	sub := hns.Subnet{Prefix: netip.MustParsePrefix("10.244.1.0/24"), Gateway: netip.MustParseAddr("10.244.1.1")}
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", []hns.Subnet{sub})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Networks(); len(got) != 1 || !slices.Equal(got[0].Subnets, []hns.Subnet{sub}) {
		t.Errorf("networks %+v, want the subnet read back", got)
	}
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep", NetworkID: n.ID, IPs: []netip.Prefix{ip}}); err != nil {
		t.Errorf("address in the subnet: %v", err)
	}
	out := netip.MustParsePrefix("10.244.2.7/24")
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: "ep2", NetworkID: n.ID, IPs: []netip.Prefix{out}}); !errors.Is(err, hns.ErrNoSubnet) {
		t.Errorf("address outside the subnet: %v, want hns.ErrNoSubnet", err)
	}
}

// HNS reports an unattached endpoint in the all-zero namespace, and refuses to remove it
// from there (M3 of the Windows review).
func TestUnattachedEndpointZeroNamespace(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	_, ep := withEndpoint(t, m, "ep")
	if ep.Namespace != hns.NoNamespace || ep.Attached() {
		t.Errorf("new endpoint in namespace %q (attached %v), want the zero GUID", ep.Namespace, ep.Attached())
	}
	if err := m.Detach(ctx, ep.Namespace, ep.ID); err == nil {
		t.Error("detaching from the zero namespace succeeded")
	}
	ns := m.AddNamespace()
	if err := m.Attach(ctx, ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Detach(ctx, ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Endpoint(ctx, "ep"); got.Namespace != hns.NoNamespace {
		t.Errorf("detached endpoint in namespace %q, want the zero GUID", got.Namespace)
	}
}

// An interface OVS meets before the extension is enabled stays unbound until ovs-vswitchd
// reconfigures: when a column it is alerted on changes, or it restarts; enabling the
// extension is no such event (review M1, N2).
func TestOVSBeforeExtension(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ifaces := map[string]string{"br-int": "internal", "Ethernet0": ""}
	if st := m.Reconfigure(ifaces, true); st["br-int"].OFPort != -1 || st["Ethernet0"].OFPort != -1 || st["br-int"].Error == "" {
		t.Errorf("status before the extension %+v, want both out of the datapath", st)
	}
	if err := m.EnableExtension(ctx, n.ID, hns.OVSExtensionID); err != nil {
		t.Fatal(err)
	}
	m.Reconfigure(ifaces, false)
	for name := range ifaces {
		if b, ok := m.OVSBinding(name); ok {
			t.Errorf("%s bound to %+v with no change in the database", name, b)
		}
	}
	st := m.Reconfigure(ifaces, true)
	if b, ok := m.OVSBinding("Ethernet0"); !ok || b.Port != "Ethernet0" || st["Ethernet0"].OFPort <= 0 || st["Ethernet0"].MACInUse != adapterMAC.String() {
		t.Errorf("Ethernet0 after a change: %+v (%v), status %+v", b, ok, st["Ethernet0"])
	}
	if _, ok := m.OVSBinding("br-int"); !ok {
		t.Error("br-int is not bound after a change in the database")
	}
	m.Reboot()
	m.RestartOVS()
	if m.Reconfigure(ifaces, false); len(m.HyperVPorts()) != 0 {
		t.Errorf("after a reboot OVS bound %v with no switch", m.HyperVPorts())
	}
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil); err != nil {
		t.Fatal(err)
	}
	m.RestartOVS()
	m.Reconfigure(ifaces, false)
	if _, ok := m.OVSBinding("Ethernet0"); ok {
		t.Error("Ethernet0 bound without the extension")
	}
}

// The vSwitch unbinds IP from the adapter it takes: IP Helper no longer lists it while the
// network exists (review C3), and lists it again once the network is gone or after a
// reboot (which removes the network).
func TestBoundAdapterLeavesIPHelper(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	n, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Interface(ctx, "Ethernet0"); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("bound adapter: %v, want hns.ErrNotFound", err)
	}
	if err := m.Configure(ctx, "Ethernet0", hostCfg); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("configuring the bound adapter: %v, want hns.ErrNotFound", err)
	}
	if _, err := m.Interface(ctx, "vEthernet (Ethernet0)"); err != nil {
		t.Fatalf("host vNIC: %v", err)
	}
	if err := m.DeleteNetwork(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Interface(ctx, "Ethernet0"); err != nil {
		t.Fatalf("adapter after the network's deletion: %v", err)
	}
	if _, err := m.CreateTransparentNetwork(ctx, "ovnt", "Ethernet0", nil); err != nil {
		t.Fatal(err)
	}
	m.Reboot()
	if _, err := m.Interface(ctx, "Ethernet0"); err != nil {
		t.Fatalf("adapter after a reboot: %v", err)
	}
}

// Enabling the OVS extension has Enable-VMSwitchExtension's semantics (review H4): the
// driver must be installed, OVS runs on one switch, and enabling it again changes nothing.
func TestEnableExtensionSemantics(t *testing.T) {
	ctx := context.Background()
	m := newHost(t)
	m.AddAdapter("Ethernet1", adapterMAC, true, hns.IPConfig{})
	a, err := m.CreateTransparentNetwork(ctx, "a", "Ethernet0", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.CreateTransparentNetwork(ctx, "b", "Ethernet1", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetFeatures(hns.Features{HyperV: true, Containers: true})
	if err := m.EnableExtension(ctx, a.ID, hns.OVSExtensionID); !errors.Is(err, hns.ErrNotFound) {
		t.Fatalf("enabling an extension that is not installed: %v, want hns.ErrNotFound", err)
	}
	m.SetFeatures(hns.Features{HyperV: true, Containers: true, OVSExtension: true})
	for range 2 {
		if err := m.EnableExtension(ctx, a.ID, strings.ToLower(hns.OVSExtensionID)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.EnableExtension(ctx, b.ID, hns.OVSExtensionID); err == nil || !strings.Contains(err.Error(), `network "a"`) {
		t.Fatalf("enabling OVS on a second switch: %v, want a refusal naming the first", err)
	}
	n, _ := m.Network(ctx, "a")
	if !slices.Equal(n.Extensions, []string{hns.OVSExtensionID}) || n.Adapter != "Ethernet0" {
		t.Fatalf("network read back %+v", n)
	}
	if n, _ := m.Network(ctx, "b"); len(n.Extensions) != 0 {
		t.Fatalf("second network's extensions %v", n.Extensions)
	}
}

// The MSI's ovsdb-server serves its named pipe only; the role adds the loopback listener
// and, on a remote chassis, the Manager rows (review N1).
func TestOVSDBServerArgs(t *testing.T) {
	for mode, want := range map[string][]string{
		"":                 nil,
		"local":            {"--remote=ptcp:0:127.0.0.1"},
		"remote":           {"--remote=ptcp:0:127.0.0.1", "--remote=db:Open_vSwitch,Open_vSwitch,manager_options"},
		"remote-plaintext": {"--remote=ptcp:0:127.0.0.1", "--remote=db:Open_vSwitch,Open_vSwitch,manager_options"},
	} {
		got, err := OVSDBServerArgs(mode)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("mode %q: %q (%v), want %q", mode, got, err, want)
		}
	}
	if got := splitCommandLine(`"C:\Program Files\x.exe" --log-file="C:\a b\l.log" --pidfile "C:\c d\conf.db"`); !slices.Equal(got,
		[]string{`C:\Program Files\x.exe`, `--log-file=C:\a b\l.log`, "--pidfile", `C:\c d\conf.db`}) {
		t.Errorf("split %q", got)
	}
}
