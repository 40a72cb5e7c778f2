package agent

// ovnt-node doctor against a Windows node made by the agent's own start-up on the HNS model
// and a real ovsdb-server: every check passes on the node as the agent left it, and each
// thing broken afterwards fails its check with a fix.

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/doctor"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/hns/hnstest"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/install"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/ovstest"
)

func TestDoctorOnWindowsModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWindowsNode(ctx, t)
	db, sw, m := w.db, w.sw, w.m
	db.FakeOVNController(nil)
	if err := w.c.setupManagementPort(ctx, winSubnet); err != nil {
		t.Fatal(err)
	}
	// ovs-vswitchd (the model's) gives the ports it opened an OpenFlow port number.
	for _, iface := range []string{"Ethernet0", "vEthernet (Ethernet0)", "k8s-win1"} {
		seen(t, sw, iface, func(i ovs.Interface) bool { return i.OFPort > 0 && i.MACInUse != "" })
	}
	seen(t, sw, "k8s-win1", ovs.Interface.Installed) // the fake ovn-controller bound it
	dir := t.TempDir()
	plugin := filepath.Join(dir, "ovnt-cni.exe")
	if err := os.WriteFile(plugin, []byte("MZ"), 0o755); err != nil {
		t.Fatal(err)
	}
	binDir, confDir := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	if err := install.Plugin(plugin, binDir, confDir, `C:\ProgramData\ovn-transparent\cni.sock`); err != nil {
		t.Fatal(err)
	}
	runtime := "containerd://1.7.20"
	n := doctor.Node{
		Name: "win1", UplinkIface: "Ethernet0", GatewayBridge: "br-phy", CNIBinDir: binDir, CNIConfDir: confDir,
		Switch: sw, HNS: m, IP: m, Network: "ovn-transparent",
		Runtime: func(context.Context) (string, error) { return runtime, nil },
	}
	// install.Plugin names the binary for the OS it runs on: Linux here.
	results := doctor.Run(ctx, n, 5*time.Second)
	want := []string{"hns-network", "ovs-extension", "ovsdb", "uplink", "openflow", "listeners", "chassis", "management-port",
		"cni-plugin", "cni-config", "cni-version", "leaked-endpoints"}
	verdict := map[string]doctor.Result{}
	for _, r := range results {
		verdict[r.Check] = r
	}
	for _, name := range want {
		r, found := verdict[name]
		switch {
		case !found:
			t.Errorf("no check %s", name)
		case name == "openflow" || name == "listeners":
			if r.Skip == "" {
				t.Errorf("%s checked without a probe or on a local chassis: %+v", name, r)
			}
		case !r.OK || r.Skip != "":
			t.Errorf("healthy node: %s: %+v", name, r)
		}
	}

	// Broken, one thing at a time.
	failed := func(check, wantDetail string) {
		t.Helper()
		for _, r := range doctor.Run(ctx, n, 5*time.Second) {
			if r.Check != check {
				continue
			}
			if r.OK || r.Skip != "" || !strings.Contains(r.Detail, wantDetail) || r.Fix == "" {
				t.Errorf("%s: %+v, want a failure saying %q with a fix", check, r, wantDetail)
			}
			return
		}
		t.Errorf("no check %s", check)
	}
	// A pod endpoint whose DEL was lost: no OVS port.
	nets := m.Networks()
	leak := hostnet.HostIfName("gone-sandbox", "eth0")
	if _, err := m.CreateEndpoint(ctx, hns.Endpoint{Name: leak, NetworkID: nets[0].ID, IPs: []netip.Prefix{netip.MustParsePrefix("10.244.3.9/24")}}); err != nil {
		t.Fatal(err)
	}
	failed("leaked-endpoints", leak)
	// A runtime that cannot read the list's version (containerd 1.7 and cniVersion 1.1.0).
	conf := filepath.Join(confDir, cni.ConfListName)
	var list map[string]any
	if b, err := os.ReadFile(conf); err != nil || json.Unmarshal(b, &list) != nil {
		t.Fatalf("%s: %v", conf, err)
	}
	list["cniVersion"] = "1.1.0"
	if b, err := json.Marshal(list); err != nil || os.WriteFile(conf, b, 0o644) != nil {
		t.Fatal(err)
	}
	failed("cni-version", "1.1.0")
	// N5: the NAT configuration sig-windows-tools' Install-Containerd.ps1 writes sorts
	// first, and containerd loads the first file only.
	nat := filepath.Join(confDir, "0-containerd-nat.json")
	if err := os.WriteFile(nat, []byte(`{"cniVersion":"0.3.0","name":"nat","type":"nat"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	failed("cni-config", "0-containerd-nat.json")
	os.Remove(nat)
	os.Remove(conf)
	failed("cni-config", cni.ConfListName)
	// N6: the management port bound to a vNIC OVS made itself, not the endpoint's: its
	// port re-added while the endpoint's vNIC was gone.
	host, _ := m.HostNamespace(ctx)
	mep, err := m.Endpoint(ctx, "k8s-win1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Detach(ctx, host, mep.ID); err != nil {
		t.Fatal(err)
	}
	db.Vsctl("del-port", "br-int", "k8s-win1")
	w.vs.Sync()
	db.Vsctl("add-port", "br-int", "k8s-win1", "--", "set", "Interface", "k8s-win1", "type=internal",
		"external_ids:iface-id=k8s-win1", "external_ids:ovn-installed=true")
	w.vs.Sync()
	if err := m.Attach(ctx, host, mep.ID); err != nil {
		t.Fatal(err)
	}
	seen(t, sw, "k8s-win1", func(i ovs.Interface) bool { return i.OFPort > 0 && i.MACInUse != "" && i.Installed() })
	failed("management-port", "not the HNS endpoint's vNIC")
	// ovs-vswitchd lost the host vNIC.
	db.Vsctl("del-port", "br-phy", "vEthernet (Ethernet0)")
	failed("uplink", "vEthernet (Ethernet0)")
	// A reboot: HNS forgets the network and the extension.
	m.Reboot()
	failed("hns-network", "no HNS network")
}

// seen waits until the agent's view of the database has the interface as cond wants.
// N1, N6: a remote chassis' listeners, with the database served as the Windows service
// serves it: the MSI's command line alone (no Manager rows: the check fails with the fix)
// and with the role's options. The chassis check does not ask the SB, for which the node
// has no identity. br-int's listener is a port the test listens on (ovs-vswitchd's).
func TestDoctorRemoteChassisListeners(t *testing.T) {
	for _, mode := range []string{"", "remote"} {
		t.Run("role "+mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args, err := hnstest.OVSDBServerArgs(mode)
			if err != nil {
				t.Fatal(err)
			}
			db := ovstest.Start(t, args...)
			sw := db.Connect()
			m := windowsHost()
			db.FakeVSwitchd(m)
			of, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer of.Close()
			cfg := windowsConfig("geneve")
			cfg.OVSDBListen, cfg.OpenFlowListen = "ptcp:0:127.0.0.1", "ptcp:"+strings.TrimPrefix(of.Addr().String(), "127.0.0.1:")+":127.0.0.1"
			if _, _, err := startup(ctx, cfg, sw, transparent(m), apiServer(t, m), logr.Discard()); err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
			defer wcancel()
			awaitManagerListener(wctx, sw, cfg.OVSDBListen) // ovsdb-server's status, every few seconds
			n := doctor.Node{Name: "win1", Switch: sw, OVSDBListen: cfg.OVSDBListen, OpenFlowListen: cfg.OpenFlowListen}
			verdict := map[string]doctor.Result{}
			for _, r := range doctor.Run(ctx, n, 5*time.Second) {
				verdict[r.Check] = r
			}
			l := verdict["listeners"]
			if mode == "" && (l.OK || !strings.Contains(l.Detail, "manager_options") || !strings.Contains(l.Fix, "windows_node role")) {
				t.Errorf("listeners with the MSI's command line: %+v, want a failure naming the option and the fix", l)
			}
			if mode != "" && (!l.OK || l.Skip != "") {
				t.Errorf("listeners with the role's command line: %+v", l)
			}
			if c := verdict["chassis"]; !c.OK || !strings.Contains(c.Detail, "remote chassis") {
				t.Errorf("chassis check on a remote chassis: %+v", c)
			}
		})
	}
}

func seen(t *testing.T, sw *ovs.Switch, name string, cond func(ovs.Interface) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := sw.Wait(ctx, name, func() (bool, error) {
		i, ok := sw.Interface(ctx, name)
		return ok && cond(i), nil
	})
	if err != nil {
		t.Fatalf("interface %s: %v", name, err)
	}
}

func TestRuntimeReads(t *testing.T) {
	for _, c := range []struct {
		runtime, version string
		ok               bool
	}{
		{"containerd://1.7.20", "1.0.0", true},
		{"containerd://1.7.20", "1.1.0", false},
		{"containerd://v1.6.9", "1.1.0", false},
		{"containerd://2.0.1", "1.1.0", true},
		{"docker://20.10.7", "1.0.0", false},
		{"cri-o://1.30.0", "1.1.0", true},
		{"garbage", "1.0.0", false},
	} {
		if err := doctor.RuntimeReads(c.runtime, c.version); (err == nil) != c.ok {
			t.Errorf("RuntimeReads(%q, %q) = %v, want ok %v", c.runtime, c.version, err, c.ok)
		}
	}
}
