//go:build linux

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

var ovnPrograms = []string{
	"ip", "ethtool", "sysctl", "ping",
	"ovsdb-tool", "ovsdb-server", "ovsdb-client", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl",
	"ovn-northd", "ovn-controller", "ovn-nbctl", "ovn-sbctl",
}

// startNodes starts the named chassis in parallel; the first gets 172.18.0.1, and so on.
func startNodes(ctx context.Context, t *testing.T, r *Run, names ...string) []*Node {
	t.Helper()
	for _, name := range names {
		if _, err := r.NodeIP(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	nodes := make([]*Node, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = r.StartNode(ctx, name, NodeOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// markedPids lists the processes that carry run id's marker.
func markedPids(id string) []string {
	var pids []string
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && bytes.Contains(data, []byte(markerEnv+"="+id+"\x00")) {
			pids = append(pids, strings.TrimSuffix(strings.TrimPrefix(f, "/proc/"), "/environ"))
		}
	}
	return pids
}

func runNetns(id string) []string {
	out, _ := Exec(context.Background(), "", "ip", "netns", "list")
	var ours []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], Prefix+id+"-") {
			ours = append(ours, f[0])
		}
	}
	return ours
}

func TestTwoNodesRegisterChassis(t *testing.T) {
	Require(t, ovnPrograms...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	r := NewTestRun(t)
	c, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("central ready after %v", time.Since(t0).Round(time.Millisecond))
	nodes := startNodes(ctx, t, r, "node1", "node2")
	t.Logf("two chassis registered after %v", time.Since(t0).Round(time.Millisecond))

	show, err := c.SBCtl(ctx, "show")
	if err != nil {
		t.Fatal(err)
	}
	got := ChassisEncaps(show)
	for i, n := range nodes {
		if want := fmt.Sprintf("172.18.0.%d", i+1); n.IP != want {
			t.Errorf("%s has IP %s, want %s", n.Name, n.IP, want)
		}
		want := "geneve " + n.IP
		if len(got[n.Name]) != 1 || got[n.Name][0] != want {
			t.Errorf("chassis %s: encaps %q, want [%q]; ovn-sbctl show:\n%s", n.Name, got[n.Name], want, show)
		}
	}
	if len(got) != 2 {
		t.Errorf("ovn-sbctl show lists %d chassis, want 2:\n%s", len(got), show)
	}

	// Nothing of the run may appear in the root namespace: the veths are made in place.
	if out, _ := Exec(ctx, "", "ip", "-o", "link"); strings.Contains(out, "0a:58:ac:12:00:") {
		t.Errorf("an underlay interface is in the root namespace:\n%s", out)
	}

	// The underlay carries the nodes' addresses: the external host reaches them, and the
	// nodes reach each other through br-phy.
	ext, err := r.StartExternalHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if out, err := ext.Exec(ctx, "ping", "-c1", "-w5", n.IP); err != nil {
			t.Errorf("external host -> %s: %v\n%s", n.Name, err, out)
		}
	}
	if out, err := nodes[0].Exec(ctx, "ping", "-c1", "-w5", nodes[1].IP); err != nil {
		t.Errorf("node1 -> node2: %v\n%s", err, out)
	}
	// A node that leaves takes its namespace and underlay port along, and comes back with the
	// same IP; its chassis row stays in the SB meanwhile, as after a crash.
	if err := nodes[1].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + nodes[1].Netns); !os.IsNotExist(err) {
		t.Errorf("netns of stopped node2 still exists (%v)", err)
	}
	if out, err := Exec(ctx, r.Name("ul"), "ip", "-o", "link", "show", "master", underlayBridge); err != nil || strings.Contains(out, nodes[1].ulPort+"@") {
		t.Errorf("underlay port of stopped node2 still on the bridge: %v\n%s", err, out)
	}
	if show, err := c.SBCtl(ctx, "show"); err != nil || ChassisEncaps(show)["node2"] == nil {
		t.Errorf("chassis node2 left the SB when its node stopped: %v\n%s", err, show)
	}
	again, err := r.StartNode(ctx, "node2", NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.IP != nodes[1].IP {
		t.Errorf("node2 rejoined with IP %s, had %s", again.IP, nodes[1].IP)
	}
	if out, err := nodes[0].Exec(ctx, "ping", "-c1", "-w5", again.IP); err != nil {
		t.Errorf("node1 -> rejoined node2: %v\n%s", err, out)
	}
	t.Logf("checks done after %v", time.Since(t0).Round(time.Millisecond))

	if t.Failed() {
		return // keep the logs: the cleanup closes the run as failed
	}
	tc := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(tc).Round(time.Millisecond))
	if ns := runNetns(r.ID); len(ns) > 0 {
		t.Errorf("namespaces left after Close: %v", ns)
	}
	if pids := markedPids(r.ID); len(pids) > 0 {
		t.Errorf("processes of the run left after Close: %v", pids)
	}
	if os.Getenv(keepLogsEnv) != "" {
		if entries, _ := os.ReadDir(r.Dir); len(entries) != 1 || entries[0].Name() != "logs" {
			t.Errorf("run dir %s holds more than logs/ after Close: %v", r.Dir, entries)
		}
	} else if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("run dir %s left after Close (%v)", r.Dir, err)
	}
}

// testPod is a stand-in for a pod until the CNI plugin exists: a namespace of the run with
// a veth whose other end is on the node's br-int, bound to logical switch port lsp.
type testPod struct {
	netns, host, ip, lsp string
	node                 *Node
}

func addTestPod(ctx context.Context, t *testing.T, r *Run, n *Node, name, lsp, mac, cidr string) *testPod {
	t.Helper()
	ns, err := r.AddNetns(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPod{netns: ns, host: name + "-h", ip: strings.Split(cidr, "/")[0], lsp: lsp, node: n}
	// MTU 1400: the pod's packets get a GENEVE header on a 1500-byte underlay. Checksum
	// offload off on both ends, as on the underlay: the userspace datapath reads the host end.
	steps := []struct {
		ns   string
		args []string
	}{
		{"", []string{"ip", "link", "add", p.host, "netns", n.Netns, "mtu", "1400", "type", "veth",
			"peer", "name", "eth0", "netns", ns, "mtu", "1400"}},
		{ns, []string{"ip", "link", "set", "eth0", "address", mac, "up"}},
		{ns, []string{"ip", "addr", "add", cidr, "dev", "eth0"}},
		{ns, []string{"ethtool", "-K", "eth0", "tx", "off"}},
		{n.Netns, []string{"ethtool", "-K", p.host, "tx", "off"}},
		{n.Netns, []string{"ip", "link", "set", p.host, "up"}},
	}
	for _, s := range steps {
		if _, err := Exec(ctx, s.ns, s.args[0], s.args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.VSCtl(ctx, "add-port", "br-int", p.host,
		"--", "set", "Interface", p.host, "external_ids:iface-id="+lsp); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitInstalled waits until ovn-controller has bound the pod's port and installed its flows.
func (p *testPod) waitInstalled(ctx context.Context, t *testing.T) {
	t.Helper()
	poll.Eventually(t, ctx, p.host+" ovn-installed", 0, 50*time.Millisecond, func() (bool, error) {
		out, err := p.node.VSCtl(ctx, "--if-exists", "get", "Interface", p.host, "external_ids:ovn-installed")
		return strings.TrimSpace(out) == `"true"`, err
	})
}

// echoExchange sends size bytes from netns to the echo port at addr and checks they come back.
func echoExchange(ctx context.Context, netns, addr string, size int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return InNetns(netns, func() error { return probe.Echo(ctx, addr, size) })
}

func TestCrossNodeDataPath(t *testing.T) {
	Require(t, ovnPrograms...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	r := NewTestRun(t)
	c, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := startNodes(ctx, t, r, "node1", "node2")
	t.Logf("central and two chassis up after %v", time.Since(t0).Round(time.Millisecond))

	for _, cmd := range [][]string{
		{"ls-add", "ls0"},
		{"lsp-add", "ls0", "pod-a"},
		{"lsp-set-addresses", "pod-a", "0a:58:0a:f4:00:0a 10.244.0.10"},
		{"lsp-add", "ls0", "pod-b"},
		{"lsp-set-addresses", "pod-b", "0a:58:0a:f4:00:0b 10.244.0.11"},
	} {
		if _, err := c.NBCtl(ctx, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	a := addTestPod(ctx, t, r, nodes[0], "pod-a", "pod-a", "0a:58:0a:f4:00:0a", "10.244.0.10/24")
	b := addTestPod(ctx, t, r, nodes[1], "pod-b", "pod-b", "0a:58:0a:f4:00:0b", "10.244.0.11/24")
	a.waitInstalled(ctx, t)
	b.waitInstalled(ctx, t)
	// ovn-installed says the local chassis is ready for its port; --wait=hv waits until every
	// chassis has caught up with the NB, so each also knows where the remote port is.
	if _, err := c.NBCtl(ctx, "--wait=hv", "sync"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testPod{a, b} {
		out, err := c.SBCtl(ctx, "--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+p.lsp)
		if err != nil || strings.TrimSpace(out) == "" {
			t.Fatalf("port binding of %s has no chassis: %v %q", p.lsp, err, out)
		}
	}
	t.Logf("ports bound after %v", time.Since(t0).Round(time.Millisecond))

	tp := time.Now()
	if out, err := Exec(ctx, a.netns, "ping", "-c3", "-i0.2", "-w10", b.ip); err != nil {
		t.Fatalf("pod-a -> pod-b ping across nodes: %v\n%s", err, out)
	}
	t.Logf("ping across nodes took %v", time.Since(tp).Round(time.Millisecond))

	// The packets really went through a GENEVE tunnel: node1's datapath pushed the header.
	flows, err := nodes[0].AppCtl(ctx, "ovs-vswitchd", "dpctl/dump-flows")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(flows, "tnl_push(") || !strings.Contains(flows, "geneve(") {
		t.Errorf("node1's datapath has no GENEVE tnl_push flow:\n%s", flows)
	}

	// The node helpers reach the right daemons.
	if out, err := nodes[0].OFCtl(ctx, "dump-flows", "br-int"); err != nil || strings.Count(out, "\n") < 50 {
		t.Errorf("ovs-ofctl dump-flows br-int on node1: %v, %d lines", err, strings.Count(out, "\n"))
	}
	if out, err := nodes[0].AppCtl(ctx, "ovn-controller", "connection-status"); err != nil || strings.TrimSpace(out) != "connected" {
		t.Errorf("ovn-controller connection-status on node1: %v %q", err, out)
	}

	// 1 MiB of TCP both ways: full-size segments at the pod MTU, checksums checked.
	srv := &probe.Server{Name: "pod-b", Echo: []uint16{8080}}
	if err := InNetns(b.netns, srv.Start); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tt := time.Now()
	if err := echoExchange(ctx, a.netns, b.ip+":8080", 1<<20); err != nil {
		t.Fatalf("TCP pod-a -> pod-b: %v", err)
	}
	t.Logf("1 MiB TCP echo across nodes took %v", time.Since(tt).Round(time.Millisecond))

	// A crashed ovn-controller restarts from the same databases and the path still works.
	tr := time.Now()
	nodes[1].OVNController().Kill()
	if _, err := nodes[1].StartOVNController(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NBCtl(ctx, "--wait=hv", "sync"); err != nil {
		t.Fatal(err)
	}
	if err := echoExchange(ctx, a.netns, b.ip+":8080", 64<<10); err != nil {
		t.Fatalf("TCP pod-a -> pod-b after restarting node2's ovn-controller: %v", err)
	}
	t.Logf("ovn-controller restart and TCP again took %v", time.Since(tr).Round(time.Millisecond))
	t.Logf("total before Close %v", time.Since(t0).Round(time.Millisecond))
}

// TestNodeWithoutChassis starts a node the way ovnt-node will find it (SkipChassis), then does
// by hand the minimum ovnt-node will do, and starts ovn-controller.
func TestNodeWithoutChassis(t *testing.T) {
	Require(t, ovnPrograms...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	r := NewTestRun(t)
	c, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.StartNode(ctx, "bare", NodeOptions{SkipChassis: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.OVNController() != nil {
		t.Error("ovn-controller started with SkipChassis")
	}
	if out, err := n.VSCtl(ctx, "list-br"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("bridges with SkipChassis: %v %q", err, out)
	}
	if out, err := n.Exec(ctx, "ip", "-o", "-4", "addr", "show", "dev", "eth0"); err != nil || !strings.Contains(out, n.IP+"/24") {
		t.Errorf("eth0 does not hold %s: %v %q", n.IP, err, out)
	}
	if _, err := n.VSCtl(ctx, "set", "Open_vSwitch", ".",
		"external_ids:system-id="+n.Name, "external_ids:ovn-remote="+c.SBRemote,
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip="+n.IP,
		"external_ids:ovn-bridge-datapath-type=netdev"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.StartOVNController(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.StartOVNController(ctx); err == nil {
		t.Error("a second ovn-controller was started on the node")
	}
	if err := n.waitChassis(ctx); err != nil {
		t.Fatal(err)
	}
	// ovn-controller made br-int itself, as the userspace type the external_ids ask for.
	if out, err := n.VSCtl(ctx, "get", "Bridge", "br-int", "datapath_type"); err != nil || strings.TrimSpace(out) != "netdev" {
		t.Errorf("br-int datapath_type: %v %q", err, out)
	}
	t.Logf("central, bare node and chassis after %v", time.Since(t0).Round(time.Millisecond))
}

// TestRestartVSwitchd: once RestartVSwitchd returns, ovs-ofctl reaches every bridge at the
// first attempt. ovs-vswitchd answers ovs-appctl up to half a second before it has made the
// bridges' management sockets again; with a wait for the control socket alone, ten restarts
// hit that window in about half the runs (the flaky
// TestSharedGateway/ovs-vswitchd_crash_and_restart, in node/integration).
func TestRestartVSwitchd(t *testing.T) {
	Require(t, "ip", "ethtool", "sysctl", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl", "ovs-ofctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := NewTestRun(t)
	n, err := r.StartNode(ctx, "node1", NodeOptions{SkipChassis: true})
	if err != nil {
		t.Fatal(err)
	}
	bridges := []string{"br-a", "br-b", "br-c", "br-d"}
	for _, br := range bridges {
		if _, err := n.VSCtl(ctx, "add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev"); err != nil {
			t.Fatal(err)
		}
	}
	// Several restarts: the window is a race, not every restart opens it.
	for i := range 10 {
		before := n.vswitchd.Pid()
		tr := time.Now()
		if err := n.RestartVSwitchd(ctx); err != nil {
			t.Fatal(err)
		}
		if n.vswitchd.Pid() == before {
			t.Fatalf("restart %d: ovs-vswitchd still has pid %d", i, before)
		}
		for _, br := range bridges {
			if _, err := n.OFCtl(ctx, "dump-flows", br); err != nil {
				t.Fatalf("restart %d, %v after the kill: %v", i, time.Since(tr).Round(time.Millisecond), err)
			}
		}
	}
}

// TestVSwitchdCrashIsRestarted: an ovs-vswitchd that dies on its own (here SIGABRT, as the
// userspace datapath's assertion failures end it) is recorded as a crash of the run, with
// its log, and replaced, so that the node's bridges serve again; RestartVSwitchd and the
// run's teardown, which end it on purpose, are no crash.
func TestVSwitchdCrashIsRestarted(t *testing.T) {
	Require(t, "ip", "ethtool", "sysctl", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl", "ovs-ofctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := NewTestRun(t)
	n, err := r.StartNode(ctx, "node1", NodeOptions{SkipChassis: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.VSCtl(ctx, "add-br", "br-a", "--", "set", "Bridge", "br-a", "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	if err := n.RestartVSwitchd(ctx); err != nil {
		t.Fatal(err)
	}
	if c := r.Crashes(); len(c) != 0 {
		t.Fatalf("a restart on purpose counted as a crash: %q", c)
	}
	n.mu.Lock()
	crashed := n.vswitchd
	n.mu.Unlock()
	if err := syscall.Kill(crashed.Pid(), syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctx, "the crash recorded and a new ovs-vswitchd serving br-a", 90*time.Second, 100*time.Millisecond, func() (bool, error) {
		c := r.Crashes()
		if len(c) != 1 || !strings.Contains(c[0], "node1: ovs-vswitchd") {
			return false, fmt.Errorf("crashes %q", c)
		}
		n.mu.Lock()
		cur := n.vswitchd
		n.mu.Unlock()
		if cur == crashed {
			return false, errors.New("still the crashed ovs-vswitchd")
		}
		_, err := n.OFCtl(ctx, "dump-flows", "br-a")
		return err == nil, err
	})
}

func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/sbin", "etc/alternatives", "usr/lib/openvswitch-switch"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/lib/openvswitch-switch/ovs-vswitchd"), []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Debian's links: absolute, through the alternatives; and a relative one.
	for link, target := range map[string]string{
		"usr/sbin/ovs-vswitchd":         "/etc/alternatives/ovs-vswitchd",
		"etc/alternatives/ovs-vswitchd": "/usr/lib/openvswitch-switch/ovs-vswitchd",
		"usr/sbin/rel":                  "../lib/openvswitch-switch/ovs-vswitchd",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/usr/sbin/ovs-vswitchd", "/usr/sbin/rel", "/usr/lib/openvswitch-switch/ovs-vswitchd"} {
		got, err := resolveIn(root, p)
		if err != nil || got != "/usr/lib/openvswitch-switch/ovs-vswitchd" {
			t.Errorf("resolveIn(%s) = %q, %v; want /usr/lib/openvswitch-switch/ovs-vswitchd", p, got, err)
		}
	}
	if !isELF(filepath.Join(root, "usr/sbin/ovs-vswitchd")) {
		t.Error("isELF: false for an ELF file through links")
	}
}

func TestMissingPin(t *testing.T) {
	out := "E: Version '26.03.1-1' for 'ovn-central' was not found\nE: mmdebstrap failed"
	if got := missingPin(out); got != "ovn-central=26.03.1-1" {
		t.Errorf("missingPin = %q", got)
	}
	if got := missingPin("E: some other failure"); got != "" {
		t.Errorf("missingPin of another failure = %q", got)
	}
}

// TestSchemaEnumEncap reads the Encap types of the pinned 23.03 SB schema and of the 26.03
// one in the rootfs, when it is built: STT only in the first.
func TestSchemaEnumEncap(t *testing.T) {
	old, err := schemaEnum("../../ovsdb-models/schemas/ovn-sb.ovsschema", "Encap", "type")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(old, []string{"geneve", "stt", "vxlan"}) {
		t.Errorf("Encap types of SB 20.27.0: %v", old)
	}
	newer := filepath.Join(OVNRootfsDir(), "root", sbSchema)
	if _, err := os.Stat(newer); err != nil {
		return // not built on this machine: the pinned schema above is the test
	}
	types, err := schemaEnum(newer, "Encap", "type")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(types, []string{"geneve", "vxlan"}) {
		t.Errorf("Encap types of the rootfs's SB: %v", types)
	}
}
