package agent

// ovnt-node doctor against a Windows node made by the agent's own start-up on the HNS model
// and a real ovsdb-server: every check passes on the node as the agent left it, and each
// thing broken afterwards fails its check with a fix.

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/doctor"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/install"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
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
	// ovs-vswitchd gives the ports it opened an OpenFlow port number.
	for i, iface := range []string{"Ethernet0", "vEthernet (Ethernet0)"} {
		db.Vsctl("set", "Interface", iface, "ofport="+string(rune('1'+i)))
		seen(t, sw, iface, func(i ovs.Interface) bool { return i.OFPort > 0 })
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
	want := []string{"hns-network", "ovs-extension", "ovsdb", "uplink", "openflow", "chassis", "management-port",
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
		case name == "openflow":
			if r.Skip == "" {
				t.Errorf("openflow checked without a probe: %+v", r)
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
	os.Remove(conf)
	failed("cni-config", cni.ConfListName)
	// ovs-vswitchd could not open the host vNIC.
	db.Vsctl("set", "Interface", "vEthernet (Ethernet0)", "ofport=-1")
	seen(t, sw, "vEthernet (Ethernet0)", func(i ovs.Interface) bool { return i.OFPort == -1 })
	failed("uplink", "vEthernet (Ethernet0)")
	// A reboot: HNS forgets the network and the extension.
	m.Reboot()
	failed("hns-network", "no HNS network")
}

// seen waits until the agent's view of the database has the interface as cond wants.
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
