package ovs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
)

// startDB serves an empty Open_vSwitch database (one root row, as `ovs-vsctl init` leaves
// it) from a temporary directory and returns a helper running ovs-vsctl against it.
// (ovstest has the same for other packages' tests, but it imports this package.)
func startDB(t *testing.T) (remote string, vsctl func(args ...string) string) {
	t.Helper()
	srv := ovsdbtest.Start(t, ovsdbtest.VSwitch)
	vsctl = func(args ...string) string {
		t.Helper()
		return srv.Exec(t, "ovs-vsctl", append([]string{"--no-wait", "--timeout=10"}, args...)...)
	}
	vsctl("init")
	return srv.Remote, vsctl
}

func connect(t *testing.T, remote string) *Switch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sw, err := Connect(ctx, remote, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sw.Close)
	return sw
}

func TestChassisKeepsSystemID(t *testing.T) {
	remote, vsctl := startDB(t)
	vsctl("set", "Open_vSwitch", ".", "external_ids:system-id=old-id", "external_ids:other=kept")
	sw := connect(t, remote)
	ctx := context.Background()
	ch := Chassis{SystemID: "node1", Hostname: "node1", SBRemote: "unix:/sb.sock", EncapType: "geneve", EncapIP: "172.18.0.1",
		BridgeMappings: "physnet:br-phy", DatapathType: "netdev"}
	for range 2 {
		id, err := sw.EnsureChassis(ctx, ch)
		if err != nil || id != "old-id" {
			t.Fatalf("EnsureChassis: %q %v, want the existing old-id", id, err)
		}
	}
	want := `{hostname=node1, other=kept, ovn-bridge-datapath-type=netdev, ovn-bridge-mappings="physnet:br-phy", ovn-encap-ip="172.18.0.1", ovn-encap-type=geneve, ovn-remote="unix:/sb.sock", system-id=old-id}`
	if got := vsctl("get", "Open_vSwitch", ".", "external_ids"); got != want {
		t.Errorf("external_ids\n got %s\nwant %s", got, want)
	}
}

func TestBridgeAndPortsConverge(t *testing.T) {
	remote, vsctl := startDB(t)
	sw := connect(t, remote)
	ctx := context.Background()
	br := Bridge{Name: "br-int", DatapathType: "netdev", FailMode: "secure", OtherConfig: map[string]string{"disable-in-band": "true"}}
	if err := sw.EnsureBridge(ctx, br); err != nil {
		t.Fatal(err)
	}
	uuid := vsctl("get", "Bridge", "br-int", "_uuid")
	vsctl("set", "Bridge", "br-int", "fail_mode=standalone", "other_config:keep=1")
	// The switch decides on its cache: let it see the change it is to undo.
	seen(t, sw, func() bool {
		b, err := sw.bridge(ctx, "br-int")
		return err == nil && b.FailMode != nil && *b.FailMode == "standalone"
	})
	if err := sw.EnsureBridge(ctx, br); err != nil {
		t.Fatal(err)
	}
	if got := vsctl("get", "Bridge", "br-int", "_uuid"); got != uuid {
		t.Errorf("bridge recreated: %s, was %s", got, uuid)
	}
	if got := vsctl("get", "Bridge", "br-int", "fail_mode", "other_config"); got != "secure\n{disable-in-band=\"true\", keep=\"1\"}" {
		t.Errorf("bridge settings not converged: %q", got)
	}
	if got := vsctl("list-ports", "br-int"); got != "" {
		t.Errorf("ports: %q (the local port is not listed)", got)
	}

	p := Port{Name: "p1", ExternalIDs: map[string]string{"iface-id": "ns_pod", "ovnt-container-id": "c1"}}
	for i, wantCreated := range []bool{true, false} {
		created, err := sw.EnsurePort(ctx, "br-int", p)
		if err != nil || created != wantCreated {
			t.Fatalf("EnsurePort #%d: created=%v %v", i, created, err)
		}
		vsctl("set", "Interface", "p1", "external_ids:ovn-installed=true")
	}
	if got := vsctl("get", "Interface", "p1", "external_ids"); got != `{iface-id=ns_pod, ovn-installed="true", ovnt-container-id=c1}` {
		t.Errorf("external_ids: %s", got)
	}
	seen(t, sw, func() bool {
		i, ok := sw.Interface(ctx, "p1")
		return ok && i.Installed()
	})
	if ifs, err := sw.InterfacesWith(ctx, "ovnt-container-id"); err != nil || len(ifs) != 1 || !ifs[0].Installed() {
		t.Errorf("InterfacesWith: %+v %v", ifs, err)
	}
	if err := sw.EnsureBridge(ctx, Bridge{Name: "br-phy", DatapathType: "netdev"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.EnsurePort(ctx, "br-phy", p); err == nil {
		t.Error("EnsurePort moved a port of another bridge")
	}
	for range 2 {
		if err := sw.DeletePort(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := vsctl("--bare", "--columns=name", "find", "Interface", "name=p1"); got != "" {
		t.Errorf("interface left: %q", got)
	}
}

// seen waits until the switch's cache satisfies cond.
func seen(t *testing.T, sw *Switch, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sw.Wait(ctx, "the cache", func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatal(err)
	}
}

func TestBridgeProtocolsAndPorts(t *testing.T) {
	remote, vsctl := startDB(t)
	sw := connect(t, remote)
	ctx := context.Background()
	want := []string{"OpenFlow10", "OpenFlow13", "OpenFlow14"}
	if err := sw.EnsureBridge(ctx, Bridge{Name: "br-phy", DatapathType: "netdev", Protocols: want}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl("get", "Bridge", "br-phy", "protocols"); got != "[OpenFlow10, OpenFlow13, OpenFlow14]" {
		t.Errorf("new bridge: protocols %s", got)
	}
	// An operator's restriction keeps its versions and gains the ones the agent needs.
	vsctl("add-br", "br-op", "--", "set", "Bridge", "br-op", "protocols=OpenFlow15")
	seen(t, sw, func() bool { _, err := sw.bridge(ctx, "br-op"); return err == nil })
	for range 2 {
		if err := sw.EnsureBridge(ctx, Bridge{Name: "br-op", Protocols: want}); err != nil {
			t.Fatal(err)
		}
	}
	if got := vsctl("get", "Bridge", "br-op", "protocols"); got != "[OpenFlow10, OpenFlow13, OpenFlow14, OpenFlow15]" {
		t.Errorf("existing bridge: protocols %s", got)
	}

	vsctl("add-port", "br-phy", "eth0", "--", "add-port", "br-phy", "patch-x",
		"--", "set", "Interface", "patch-x", "type=patch", "--", "set", "Port", "patch-x", "external_ids:ovn-localnet-port=breth0_n1")
	seen(t, sw, func() bool {
		ps, err := sw.BridgePorts(ctx, "br-phy")
		return err == nil && len(ps) == 3
	})
	ps, _ := sw.BridgePorts(ctx, "br-phy")
	var names []string
	for _, p := range ps {
		for _, i := range p.Interfaces {
			names = append(names, fmt.Sprintf("%s%v/%s/%s", p.Name, p.ExternalIDs, i.Name, i.Type))
		}
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != "br-phymap[]/br-phy/internal eth0map[]/eth0/ patch-xmap[ovn-localnet-port:breth0_n1]/patch-x/patch" {
		t.Errorf("ports of br-phy: %s", got)
	}
	if _, err := sw.BridgePorts(ctx, "br-none"); err == nil {
		t.Error("interfaces of a bridge that does not exist")
	}
}

// Two writers creating the same bridge at once (the agent and ovn-controller both create
// br-int): the one whose insert loses to the unique name brings the winner's bridge to its
// settings instead of failing.
func TestEnsureBridgeLosesCreateRace(t *testing.T) {
	remote, vsctl := startDB(t)
	a, b := connect(t, remote), connect(t, remote)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		name := fmt.Sprintf("br-race%d", i)
		errs := make(chan error, 2)
		for _, sw := range []*Switch{a, b} {
			go func() {
				errs <- sw.EnsureBridge(ctx, Bridge{Name: name, DatapathType: "netdev"})
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if got := vsctl("get", "Bridge", name, "datapath_type"); got != "netdev" {
			t.Errorf("%s: datapath_type %s", name, got)
		}
	}
}

func TestEnsureSSL(t *testing.T) {
	remote, vsctl := startDB(t)
	sw := connect(t, remote)
	ctx := context.Background()
	first := SSL{PrivateKey: "/pki/node1-privkey.pem", Certificate: "/pki/node1-cert.pem", CACert: "/pki/cacert.pem"}
	for range 2 {
		if err := sw.EnsureSSL(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	// ovs-vsctl get-ssl is what an operator reads, and reads the row the way ovn-controller
	// does.
	want := "Private key: /pki/node1-privkey.pem\nCertificate: /pki/node1-cert.pem\nCA Certificate: /pki/cacert.pem\nBootstrap: false"
	if got := vsctl("get-ssl"); got != want {
		t.Errorf("get-ssl after EnsureSSL:\n%s\nwant\n%s", got, want)
	}
	uuid := vsctl("get", "Open_vSwitch", ".", "ssl")
	vsctl("set", "SSL", uuid, "external_ids:owner=operator")

	// New paths (a rotation to other file names) update the same row.
	second := SSL{PrivateKey: "/pki2/k.pem", Certificate: "/pki2/c.pem", CACert: "/pki2/ca.pem"}
	if err := sw.EnsureSSL(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := vsctl("get", "Open_vSwitch", ".", "ssl"); got != uuid {
		t.Errorf("SSL row replaced: %s, was %s", got, uuid)
	}
	if got := vsctl("get", "SSL", uuid, "private_key", "certificate", "ca_cert", "external_ids:owner"); got != "\"/pki2/k.pem\"\n\"/pki2/c.pem\"\n\"/pki2/ca.pem\"\noperator" {
		t.Errorf("SSL row after the second EnsureSSL:\n%s", got)
	}
	if err := sw.EnsureSSL(ctx, SSL{PrivateKey: "/k.pem"}); err == nil {
		t.Error("EnsureSSL took an incomplete SSL")
	}
}

// TestListeners: a remote chassis' manager and br-int controller converge and stay single,
// an operator's other manager is kept, a stale controller is replaced, and the SSL row goes.
func TestListeners(t *testing.T) {
	remote, vsctl := startDB(t)
	vsctl("add-br", "br-int", "--", "set-controller", "br-int", "tcp:10.0.0.1:6653",
		"--", "set-manager", "ptcp:6641:127.0.0.1", "--", "set-ssl", "/k.pem", "/c.pem", "/ca.pem")
	sw := connect(t, remote)
	ctx := context.Background()
	probes := func() string {
		return vsctl("--columns=inactivity_probe", "--bare", "list", "Controller") + "/" +
			vsctl("--columns=inactivity_probe", "--bare", "find", "Manager", "target=pssl\\:6640")
	}
	// Twice (idempotent), then with another probe: the same rows get it.
	for _, probe := range []time.Duration{time.Minute, time.Minute, 30 * time.Second} {
		if err := sw.EnsureManager(ctx, "pssl:6640", probe); err != nil {
			t.Fatal(err)
		}
		if err := sw.EnsureController(ctx, "br-int", "pssl:6653", probe); err != nil {
			t.Fatal(err)
		}
		if got, want := probes(), fmt.Sprintf("%d/%d", probe.Milliseconds(), probe.Milliseconds()); got != want {
			t.Errorf("inactivity probes (Controller/Manager) after %s: %q, want %q", probe, got, want)
		}
	}
	if got := vsctl("get-manager"); got != "pssl:6640\nptcp:6641:127.0.0.1" {
		t.Errorf("get-manager: %q", got)
	}
	if got := vsctl("get-controller", "br-int"); got != "pssl:6653" {
		t.Errorf("get-controller br-int: %q", got)
	}
	if got := vsctl("--columns=target", "--bare", "list", "Controller"); got != "pssl:6653" {
		t.Errorf("Controller rows: %q, want the replaced one gone", got)
	}
	for i, want := range []bool{true, false} {
		removed, err := sw.RemoveSSL(ctx)
		if err != nil || removed != want {
			t.Errorf("RemoveSSL #%d: %v %v, want %v", i+1, removed, err, want)
		}
	}
	if got := vsctl("get-ssl"); got != "" {
		t.Errorf("get-ssl after RemoveSSL: %q", got)
	}
	if err := sw.EnsureController(ctx, "br-missing", "pssl:6653", 0); err == nil {
		t.Error("EnsureController on a missing bridge: no error")
	}
}
