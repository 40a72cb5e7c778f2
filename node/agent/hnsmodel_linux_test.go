package agent

// The Windows node's start-up, run on Linux: the agent's own setupChassis and management
// port code over hostnet.Transparent, with HNS and the host's IP configuration from
// hnstest.Model and a real ovsdb-server. The tests check the state both leave.

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/hns/hnstest"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/ovstest"
)

var (
	winMAC, _ = net.ParseMAC("00:15:5d:01:02:03")
	winIP     = netip.MustParsePrefix("172.18.0.5/24")
	winGW     = netip.MustParseAddr("172.18.0.254")
	winDNS    = netip.MustParseAddr("172.18.0.53")
	winRoute  = hns.Route{Dst: netip.MustParsePrefix("192.168.50.0/24"), NextHop: netip.MustParseAddr("172.18.0.250")}
	// winSubnet is the node's pod subnet, which the master allocated before start-up.
	winSubnet = netip.MustParsePrefix("10.244.3.0/24")
)

// windowsHost is a Windows Server with one physical adapter, Ethernet0, and a vNIC of some
// other vSwitch; HNS moves the adapter's configuration 300ms after creating the network.
func windowsHost() *hnstest.Model {
	m := hnstest.NewModel()
	m.IPMoveDelay = 300 * time.Millisecond
	m.AddAdapter("Ethernet0", winMAC, true, hns.IPConfig{Addrs: []netip.Prefix{winIP}, Gateway: winGW,
		DNS: []netip.Addr{winDNS}, Routes: []hns.Route{winRoute}, MTU: 1500})
	m.AddAdapter("vEthernet (nat)", winMAC, false, hns.IPConfig{})
	return m
}

func transparent(m *hnstest.Model) *hostnet.Transparent {
	return hostnet.NewTransparent(m, m, m, hostnet.TransparentConfig{IPMoveTimeout: 3 * time.Second, Poll: 20 * time.Millisecond,
		DeleteTimeout: time.Second, Log: logr.Discard()})
}

func windowsConfig(encap string) Config {
	return Config{
		NodeName: "win1", SBAddress: "tcp:172.18.0.1:6642", EncapType: encap, MTU: 1400,
		UplinkIface: "Ethernet0", GatewayBridge: "br-phy",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
	}
}

func TestWindowsStartupAndAdoption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	sw := db.Connect()
	m := windowsHost()
	cfg := windowsConfig("geneve")

	vs := db.FakeVSwitchd(m)
	for run := range 2 { // the second run is the agent restarted: it adopts what the first made
		info, addr, err := setupChassis(ctx, cfg, sw, transparent(m), winSubnet)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		// OVS binds the adapter and the host vNIC to their own Hyper-V ports, and the
		// bridges' own internal ports to vNICs it makes (which it can only once the
		// extension is enabled: M1).
		vs.Sync()
		for iface, port := range map[string]string{"Ethernet0": "Ethernet0", "vEthernet (Ethernet0)": "vEthernet (Ethernet0)"} {
			if b, ok := m.OVSBinding(iface); !ok || b.Port != port || b.ByOVS {
				t.Errorf("run %d: OVS interface %q bound to %+v (%v), want the Hyper-V port %q", run, iface, b, ok, port)
			}
		}
		for _, br := range []string{"br-int", "br-phy"} {
			if b, ok := m.OVSBinding(br); !ok || !b.ByOVS {
				t.Errorf("run %d: bridge %s's own port bound to %+v (%v), want a vNIC OVS made", run, br, b, ok)
			}
		}
		calls := m.Calls()
		created := slices.Contains(calls, "CreateTransparentNetwork")
		if created != (run == 0) {
			t.Errorf("run %d: network created %v (calls %v)", run, created, calls)
		}
		if run == 1 && slices.Contains(calls, "EnableExtension") {
			t.Errorf("restart enabled the extension again: %v", calls)
		}
		if addr.IfName != "vEthernet (Ethernet0)" || addr.HostPort != "vEthernet (Ethernet0)" || addr.IP != winIP || addr.NextHop != winGW || addr.MAC.String() != winMAC.String() {
			t.Errorf("run %d: node address %+v", run, addr)
		}
		if info.NodeIP != winIP.String() || info.ChassisID != "win1" {
			t.Errorf("run %d: chassis info %+v", run, info)
		}
		checkWindowsHNS(t, m)
		checkWindowsOVS(t, db, "geneve")
	}
}

// winNode is a Windows node as the agent's start-up leaves it on the HNS model, with a fake
// ovs-vswitchd playing the Windows datapath over it.
type winNode struct {
	db  *ovstest.DB
	sw  *ovs.Switch
	m   *hnstest.Model
	cfg Config
	vs  *ovstest.VSwitchd
	api *fake.Clientset
	c   *nodeController // its management port's controller
}

func startWindowsNode(ctx context.Context, t *testing.T) winNode {
	t.Helper()
	w := winNode{db: ovstest.Start(t), m: windowsHost(), cfg: windowsConfig("geneve")}
	w.sw = w.db.Connect()
	host := transparent(w.m)
	w.vs = w.db.FakeVSwitchd(w.m)
	w.api = apiServer(t, w.m)
	if _, _, err := startup(ctx, w.cfg, w.sw, host, w.api, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	w.vs.Sync() // ovs-vswitchd acts on what start-up wrote before the endpoint comes
	w.c = &nodeController{cfg: w.cfg, sw: w.sw, host: host}
	return w
}

// apiServer is the API server as the Windows node reaches it: through its host vNIC, so
// not while the host is offline (m.HostOnline). It holds the node win1 with its subnet.
func apiServer(t *testing.T, m *hnstest.Model) *fake.Clientset {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1",
		Annotations: map[string]string{contract.NodeSubnetKey: winSubnet.String()}}}
	client := fake.NewSimpleClientset(node)
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if !m.HostOnline() {
			return true, nil, errors.New("dial tcp 172.18.0.1:6443: connectex: A socket operation was attempted to an unreachable network")
		}
		return false, nil, nil
	})
	return client
}

// checkWindowsHNS: one Transparent network on Ethernet0 with the OVS extension, and the
// node's whole IP configuration on the host vNIC (HNS moved it; enabling the extension
// before the move would have lost it).
func checkWindowsHNS(t *testing.T, m *hnstest.Model) {
	t.Helper()
	nets := m.Networks()
	wantSubnets := []hns.Subnet{{Prefix: winSubnet, Gateway: netip.MustParseAddr("10.244.3.1")}}
	if len(nets) != 1 || nets[0].Name != "ovn-transparent" || nets[0].Type != hns.TypeTransparent || nets[0].Adapter != "Ethernet0" ||
		!slices.Equal(nets[0].Extensions, []string{hns.OVSExtensionID}) || !slices.Equal(nets[0].Subnets, wantSubnets) {
		t.Fatalf("HNS networks %+v", nets)
	}
	v, ok := m.InterfaceNow("vEthernet (Ethernet0)")
	if !ok || !slices.Equal(v.Addrs, []netip.Prefix{winIP}) || v.Gateway != winGW || !slices.Equal(v.DNS, []netip.Addr{winDNS}) ||
		!slices.Equal(v.Routes, []hns.Route{winRoute}) {
		t.Fatalf("host vNIC %+v", v)
	}
	if a, _ := m.InterfaceNow("Ethernet0"); len(a.Addrs) != 0 {
		t.Fatalf("the adapter kept addresses %v", a.Addrs)
	}
}

func checkWindowsOVS(t *testing.T, db *ovstest.DB, encap string) {
	t.Helper()
	ports := strings.Split(db.Vsctl("list-ports", "br-phy"), "\n")
	slices.Sort(ports)
	if want := []string{"Ethernet0", "vEthernet (Ethernet0)"}; !slices.Equal(ports, want) {
		t.Errorf("br-phy ports %q, want %q", ports, want)
	}
	for iface, typ := range map[string]string{"Ethernet0": `""`, "vEthernet (Ethernet0)": "internal"} {
		if got := db.Vsctl("get", "Interface", iface, "type"); got != typ {
			t.Errorf("interface %q type %s, want %s", iface, got, typ)
		}
	}
	if got := db.Vsctl("get", "Bridge", "br-phy", "other_config:hwaddr"); got != `"`+winMAC.String()+`"` {
		t.Errorf("br-phy hwaddr %s, want the adapter's MAC", got)
	}
	// The management port waits for its HNS endpoint, which waits for the node subnet.
	if got := db.Vsctl("list-ports", "br-int"); got != "" {
		t.Errorf("br-int ports %q before the node subnet is known, want none", got)
	}
	if got := db.Vsctl("get", "Bridge", "br-int", "fail_mode"); got != "secure" {
		t.Errorf("br-int fail_mode %s", got)
	}
	for k, want := range map[string]string{
		"system-id": "win1", "ovn-encap-type": encap, "ovn-encap-ip": winIP.Addr().String(),
		"ovn-bridge-mappings": "physnet:br-phy", "ovn-remote": "tcp:172.18.0.1:6642",
	} {
		if got := strings.Trim(db.Vsctl("get", "Open_vSwitch", ".", "external_ids:"+k), `"`); got != want {
			t.Errorf("Open_vSwitch external_ids:%s = %q, want %q", k, got, want)
		}
	}
}

// Some Windows builds never move the configuration, others only the addresses (review
// M7): the node adds what the host vNIC lacks (addresses, gateway, DNS servers, routes).
func TestWindowsStartupRestoresWhatHNSDidNotMove(t *testing.T) {
	for _, c := range []struct {
		name  string
		model func(*hnstest.Model)
		encap string
	}{
		{"nothing moved", func(m *hnstest.Model) { m.IPMoveLost = true }, "stt"},
		{"addresses only", func(m *hnstest.Model) { m.IPMoveAddrsOnly = true }, "geneve"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db := ovstest.Start(t)
			m := windowsHost()
			c.model(m)
			host := hostnet.NewTransparent(m, m, m, hostnet.TransparentConfig{IPMoveTimeout: 500 * time.Millisecond, Poll: 20 * time.Millisecond, Log: logr.Discard()})
			if _, _, err := setupChassis(ctx, windowsConfig(c.encap), db.Connect(), host, winSubnet); err != nil {
				t.Fatal(err)
			}
			checkWindowsHNS(t, m)
			checkWindowsOVS(t, db, c.encap)
		})
	}
}

func TestWindowsStartupRefusesVirtualAdapter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	m := windowsHost()
	cfg := windowsConfig("geneve")
	cfg.UplinkIface = "vEthernet (nat)"
	_, _, err := setupChassis(ctx, cfg, db.Connect(), transparent(m), winSubnet)
	if err == nil || !strings.Contains(err.Error(), "physical adapter") {
		t.Fatalf("start-up on a virtual adapter: %v, want a refusal naming the physical adapter", err)
	}
	if n := m.Networks(); len(n) != 0 {
		t.Errorf("HNS networks after the refusal: %+v", n)
	}
	if _, err := db.TryVsctl("br-exists", "br-phy"); err == nil {
		t.Error("br-phy exists after the refusal")
	}
}

func TestWindowsManagementPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWindowsNode(ctx, t)
	db, m, c, cfg, vs := w.db, w.m, w.c, w.cfg, w.vs
	for _, subnet := range []string{"10.244.3.0/24", "10.244.3.0/24"} { // the second time changes nothing
		s := netip.MustParsePrefix(subnet)
		if err := c.setupManagementPort(ctx, s); err != nil {
			t.Fatal(err)
		}
		// The management port is bound to the endpoint's vNIC, which holds the address
		// and routes, not to a stray vNIC OVS made (H1).
		vs.Sync()
		if b, ok := m.OVSBinding("k8s-win1"); !ok || b.ByOVS || b.Endpoint != "k8s-win1" || !m.Forwards("k8s-win1") {
			t.Fatalf("%s: management port bound to %+v (%v), want the HNS endpoint's vNIC (Hyper-V ports %v)", subnet, b, ok, m.HyperVPorts())
		}
		for col, want := range map[string]string{"type": "internal", "external_ids:iface-id": "k8s-win1"} {
			if got := db.Vsctl("get", "Interface", "k8s-win1", col); got != want {
				t.Errorf("%s: management port %s %s, want %s", subnet, col, got, want)
			}
		}
		gw := s.Addr().Next()
		ip := netip.PrefixFrom(gw.Next(), 24)
		mac := contract.MACFromIP(ip.Addr())
		var eps []hns.Endpoint
		for _, e := range m.AllEndpoints() {
			if e.Name == "k8s-win1" {
				eps = append(eps, e)
			}
		}
		if len(eps) != 1 || eps[0].MAC.String() != mac.String() || !slices.Equal(eps[0].IPs, []netip.Prefix{ip}) || !eps[0].Attached() {
			t.Fatalf("%s: management endpoints %+v", subnet, eps)
		}
		v, ok := m.InterfaceNow("vEthernet (k8s-win1)")
		wantRoutes := []hns.Route{{Dst: cfg.ClusterCIDRs[0], NextHop: gw}, {Dst: cfg.ServiceCIDRs[0], NextHop: gw}}
		if !ok || !slices.Equal(v.Addrs, []netip.Prefix{ip}) || !slices.Equal(v.Routes, wantRoutes) || v.MTU != 1400 || v.Gateway.IsValid() {
			t.Fatalf("%s: management vNIC %+v", subnet, v)
		}
		if got := db.Vsctl("get", "Interface", "k8s-win1", "mac"); got != `"`+mac.String()+`"` {
			t.Errorf("%s: management port mac %s, want %s", subnet, got, mac)
		}
		// N4: a pod's packet to the node IP arrives on the management vNIC for the
		// host vNIC's address, and the answer leaves through the management vNIC.
		if !m.HostAccepts("vEthernet (k8s-win1)", winIP.Addr()) {
			t.Errorf("%s: the host drops pods' packets to the node IP (strong host model on the management vNIC)", subnet)
		}
	}
	// The network's IPAM subnet is the node's: a subnet of another node cannot be used
	// (HNS cannot change a network's subnets; the docs say to drain and recreate).
	if err := c.setupManagementPort(ctx, netip.MustParsePrefix("10.244.7.0/24")); !errors.Is(err, hns.ErrNoSubnet) {
		t.Errorf("management port in another subnet: %v, want hns.ErrNoSubnet", err)
	}
}

// H3: the Transparent network is created with the node's pod subnet as its static IPAM
// subnet; a network without it (an older agent's) or with another is not adopted, and the
// agent says how to remove it.
func TestWindowsStartupRefusesNetworkOfAnotherSubnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	m := windowsHost()
	if _, err := m.CreateTransparentNetwork(ctx, "ovn-transparent", "Ethernet0", nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := setupChassis(ctx, windowsConfig("geneve"), db.Connect(), transparent(m), winSubnet)
	if err == nil || !strings.Contains(err.Error(), "Remove-HnsNetwork") || !strings.Contains(err.Error(), "subnet") {
		t.Fatalf("start-up with a network without the node subnet: %v, want a refusal naming the subnet and how to remove it", err)
	}
	_, _, err = setupChassis(ctx, windowsConfig("geneve"), db.Connect(), transparent(m), netip.Prefix{})
	if err == nil || !strings.Contains(err.Error(), "subnet") {
		t.Fatalf("start-up without the node subnet: %v, want a refusal", err)
	}
}

// The agent dies after creating the network and before HNS moved (or it restored) the
// host's configuration, on a build that never moves it: the restarted agent adopts the
// network and restores the configuration it saved to disk.
func TestWindowsStartupRestoresAfterCrash(t *testing.T) {
	db := ovstest.Start(t)
	sw := db.Connect()
	m := windowsHost()
	m.IPMoveLost = true
	state := t.TempDir()
	host := func(stateDir string) *hostnet.Transparent {
		return hostnet.NewTransparent(m, m, m, hostnet.TransparentConfig{IPMoveTimeout: 400 * time.Millisecond,
			Poll: 20 * time.Millisecond, StateDir: stateDir, Log: logr.Discard()})
	}
	crash, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, _, err := setupChassis(crash, windowsConfig("geneve"), sw, host(state), winSubnet); err == nil {
		t.Fatal("start-up finished within the crash's deadline; the test proves nothing")
	}
	if n := m.Networks(); len(n) != 1 {
		t.Fatalf("networks after the crash: %+v", n)
	}
	if v, _ := m.InterfaceNow("vEthernet (Ethernet0)"); len(v.Addrs) != 0 {
		t.Fatalf("the vNIC has addresses %v after the crash", v.Addrs)
	}
	m.Calls()
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, _, err := setupChassis(ctx, windowsConfig("geneve"), sw, host(t.TempDir()), winSubnet); err == nil {
		t.Fatal("a restart without the saved configuration adopted a network without the node's address")
	}
	if _, _, err := setupChassis(ctx, windowsConfig("geneve"), sw, host(state), winSubnet); err != nil {
		t.Fatal(err)
	}
	if calls := m.Calls(); slices.Contains(calls, "CreateTransparentNetwork") {
		t.Errorf("the restart created a network: %v", calls)
	}
	checkWindowsHNS(t, m)
	checkWindowsOVS(t, db, "geneve")
}

// A network of the agent's name bound to another adapter is not adopted: the agent stops
// and says how to remove it, and touches neither HNS nor OVS.
func TestWindowsStartupRefusesForeignNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	m := windowsHost()
	m.AddAdapter("Ethernet1", winMAC, true, hns.IPConfig{})
	if _, err := m.CreateTransparentNetwork(ctx, "ovn-transparent", "Ethernet1", nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := setupChassis(ctx, windowsConfig("geneve"), db.Connect(), transparent(m), winSubnet)
	if err == nil || !strings.Contains(err.Error(), "Remove-HnsNetwork") {
		t.Fatalf("start-up with a foreign network: %v, want a refusal saying how to remove it", err)
	}
	if n := m.Networks(); len(n) != 1 || n[0].Adapter != "Ethernet1" || len(n[0].Extensions) != 0 {
		t.Errorf("HNS networks after the refusal: %+v", n)
	}
	if _, err := db.TryVsctl("br-exists", "br-phy"); err == nil {
		t.Error("br-phy exists after the refusal")
	}
}

// M2, N2: a reboot takes the HNS network and the pods' endpoints but not the OVS database,
// and ovs-vswitchd starts before any vSwitch exists, so it adds none of the node's ports,
// and tries again only when its database changes. The restarted agent removes the ports
// whose endpoints are gone before it enables the extension again (so OVS makes no stray
// vNICs for them), and afterwards makes ovs-vswitchd add the uplink, the host vNIC, the
// bridges and the management port again: all bound to their own Hyper-V ports, with no
// restart of ovs-vswitchd.
func TestWindowsReboot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := startWindowsNode(ctx, t)
	db, sw, m, cfg, vs := w.db, w.sw, w.m, w.cfg, w.vs
	if err := w.c.setupManagementPort(ctx, winSubnet); err != nil {
		t.Fatal(err)
	}
	net := m.Networks()[0]
	const port = "ovt000000000001"
	ep, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: port, NetworkID: net.ID, MAC: winMAC,
		IPs: []netip.Prefix{netip.MustParsePrefix("10.244.3.9/24")}})
	if err != nil {
		t.Fatal(err)
	}
	ns := m.AddNamespace()
	if err := m.Attach(ctx, ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	db.Vsctl("add-port", "br-int", port, "--", "set", "Interface", port, "type=internal",
		"external_ids:ovnt-container-id=c1", "external_ids:ovnt-pod=ns1/web-9")
	vs.Sync()
	checkWindowsBound(t, m, "before the reboot", port)
	if err := dropStalePorts(ctx, sw, transparent(m), "k8s-win1", logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if got := db.Vsctl("list-ports", "br-int"); !strings.Contains(got, port) {
		t.Fatalf("a restart without a reboot removed the live pod's port: br-int ports %q", got)
	}

	m.Reboot()
	vs.Sync() // ovs-vswitchd starts before the agent, and before any vSwitch exists
	bootAgent(ctx, t, w)
	vs.Sync()
	if got := db.Vsctl("list-ports", "br-int"); got != "k8s-win1" {
		t.Errorf("br-int ports after the reboot %q, want the management port only", got)
	}
	checkWindowsBound(t, m, "after the reboot")
	if !m.HostAccepts("vEthernet (k8s-win1)", winIP.Addr()) {
		t.Error("after the reboot the host drops pods' packets to the node IP (strong host model)")
	}
	if got := m.HyperVPorts(); slices.Contains(got, port) {
		t.Errorf("Hyper-V ports after the reboot %v: OVS made a stray vNIC for the stale port", got)
	}
	checkWindowsHNS(t, m)
	_ = cfg
}

// bootAgent is the agent's start-up after a restart or reboot (startup, as Run calls it),
// then its management port once the API server has given the node subnet.
func bootAgent(ctx context.Context, t *testing.T, w winNode) {
	t.Helper()
	host := transparent(w.m)
	if _, _, err := startup(ctx, w.cfg, w.sw, host, w.api, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	c := &nodeController{cfg: w.cfg, sw: w.sw, host: host}
	if err := c.setupManagementPort(ctx, winSubnet); err != nil {
		t.Fatal(err)
	}
}

// N3: the agent died after enabling the extension and before putting the host vNIC into
// br-phy, so the host is offline (the extension drops the host vNIC's frames) and the API
// server unreachable. The restarted agent takes the node subnet from the HNS network and
// repairs the node before it needs the API server.
func TestWindowsStartupOfflineRepairsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := winNode{db: ovstest.Start(t), m: windowsHost(), cfg: windowsConfig("geneve")}
	w.sw = w.db.Connect()
	w.vs = w.db.FakeVSwitchd(w.m)
	w.api = apiServer(t, w.m)
	// What the crash left: the network with the extension, br-phy with the adapter only.
	n, err := w.m.CreateTransparentNetwork(ctx, "ovn-transparent", "Ethernet0",
		[]hns.Subnet{{Prefix: winSubnet, Gateway: netip.MustParseAddr("10.244.3.1")}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * w.m.IPMoveDelay)
	if err := w.m.EnableExtension(ctx, n.ID, hns.OVSExtensionID); err != nil {
		t.Fatal(err)
	}
	w.db.Vsctl("add-br", "br-phy", "--", "add-port", "br-phy", "Ethernet0")
	w.vs.Sync()
	if w.m.HostOnline() {
		t.Fatal("the host is online in the crash's state; the test proves nothing")
	}
	if _, err := w.api.CoreV1().Nodes().Get(ctx, "win1", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answers an offline host")
	}
	bootAgent(ctx, t, w)
	w.vs.Sync()
	if !w.m.HostOnline() {
		t.Errorf("the host is offline after start-up (Hyper-V ports %v)", w.m.HyperVPorts())
	}
	checkWindowsBound(t, w.m, "after the repair")
	checkWindowsHNS(t, w.m)
}

// checkWindowsBound: OVS has bound the uplink and the host vNIC to their own Hyper-V ports,
// the management port and each of pods to its endpoint's vNIC, and the bridges' own ports
// to vNICs it made; the Interface rows say so (ofport, mac_in_use).
func checkWindowsBound(t *testing.T, m *hnstest.Model, when string, pods ...string) {
	t.Helper()
	want := map[string]hnstest.Binding{
		"Ethernet0": {Port: "Ethernet0"}, "vEthernet (Ethernet0)": {Port: "vEthernet (Ethernet0)"},
		"br-int": {Port: "br-int", ByOVS: true}, "br-phy": {Port: "br-phy", ByOVS: true},
		"k8s-win1": {Port: "k8s-win1", Endpoint: "k8s-win1"},
	}
	for _, p := range pods {
		want[p] = hnstest.Binding{Port: p, Endpoint: p}
	}
	for iface, b := range want {
		if got, ok := m.OVSBinding(iface); !ok || got != b {
			t.Errorf("%s: OVS interface %q bound to %+v (%v), want %+v (Hyper-V ports %v)", when, iface, got, ok, b, m.HyperVPorts())
		}
	}
}

// M4: a host that lists no default namespace gets one, once, for the management port.
func TestWindowsManagementPortWithoutHostNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	sw := db.Connect()
	m := windowsHost()
	m.NoHostNamespace()
	host := transparent(m)
	cfg := windowsConfig("geneve")
	if _, _, err := setupChassis(ctx, cfg, sw, host, winSubnet); err != nil {
		t.Fatal(err)
	}
	c := &nodeController{cfg: cfg, sw: sw, host: host}
	for range 2 {
		if err := c.setupManagementPort(ctx, winSubnet); err != nil {
			t.Fatalf("management port on a host without a default namespace: %v", err)
		}
	}
	created := 0
	for _, op := range m.Calls() {
		if op == "CreateHostNamespace" {
			created++
		}
	}
	if created != 1 {
		t.Errorf("host namespaces created: %d, want 1", created)
	}
	host1, err := m.HostNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ep, err := m.Endpoint(ctx, "k8s-win1"); err != nil || ep.Namespace != host1 {
		t.Errorf("management endpoint %+v (%v), want it in the host namespace %s", ep, err, host1)
	}
	if _, ok := m.InterfaceNow("vEthernet (k8s-win1)"); !ok {
		t.Error("no management vNIC")
	}
}

// A host without the Containers feature has no HNS to ask whether the network exists: the
// agent says what to install, not HNS's error.
func TestWindowsStartupWithoutHNSSaysWhatToInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	m := windowsHost()
	m.SetFeatures(hns.Features{HyperV: true, OVSExtension: true})
	m.Fail("Network", errors.New("the RPC server is unavailable"))
	_, _, err := setupChassis(ctx, windowsConfig("geneve"), db.Connect(), transparent(m), winSubnet)
	if err == nil || !strings.Contains(err.Error(), "Install-WindowsFeature Containers") {
		t.Fatalf("start-up without HNS: %v, want the preflight's advice to install Containers", err)
	}
}

// N1: a remote chassis' database listener is a Manager row, which ovsdb-server serves only
// when started with --remote=db:Open_vSwitch,Open_vSwitch,manager_options. The database is
// started with the remotes of the Windows service's command line: the MSI's alone (no
// listener; the agent says what to fix), and the MSI's with the role's (the listener
// opens, and a client connects to it).
func TestWindowsRemoteChassisListener(t *testing.T) {
	for _, c := range []struct {
		mode   string
		listen bool
	}{{"", false}, {"remote", true}, {"remote-plaintext", true}} {
		t.Run("role "+c.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args, err := hnstest.OVSDBServerArgs(c.mode)
			if err != nil {
				t.Fatal(err)
			}
			db := ovstest.Start(t, args...)
			sw := db.Connect()
			m := windowsHost()
			db.FakeVSwitchd(m)
			cfg := windowsConfig("geneve")
			// pssl:6640 and pssl:6653, on ports of the test's own.
			cfg.OVSDBListen, cfg.OpenFlowListen = "ptcp:0:127.0.0.1", "ptcp:0:127.0.0.1"
			if _, _, err := startup(ctx, cfg, sw, transparent(m), apiServer(t, m), logr.Discard()); err != nil {
				t.Fatal(err)
			}
			// ovsdb-server refreshes a Manager's status every few seconds.
			wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
			defer wcancel()
			port, err := awaitManagerListener(wctx, sw, cfg.OVSDBListen)
			if !c.listen {
				if err == nil || !strings.Contains(err.Error(), "manager_options") || !strings.Contains(err.Error(), "windows_node role") {
					t.Fatalf("listener with the MSI's command line: port %d, %v; want an error naming the option and the fix", port, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("listener with the role's command line: %v", err)
			}
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String())
			if err != nil {
				t.Fatalf("connecting to the listener on port %d: %v", port, err)
			}
			conn.Close()
		})
	}
}
