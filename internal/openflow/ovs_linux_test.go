//go:build linux

package openflow

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// ovsNode is one ovs-vswitchd (userspace datapath) in its own network namespace, with its
// own ovsdb-server, laid out like a node's br-phy:
//
//	br-phy (LOCAL: the node IP 172.18.0.1, MAC gwMAC)
//	  ofport 1 eth0  -- veth --  ext0 in namespace "ext" (172.18.0.100, "the underlay")
//	  ofport 2 patch-phy -- patch -- br-int
//	br-ref: no ports; ovs-ofctl installs the recipe's text rules there, as the oracle
//
// It does not use harness.StartNode because the tests kill and restart ovs-vswitchd.
type ovsNode struct {
	t        *testing.T
	r        *harness.Run
	netns    string // where ovs-vswitchd runs (its netdev ports live there)
	extNS    string
	dir      string // OVS_RUNDIR: <bridge>.mgmt sockets, control sockets
	db       *ovsdbtest.Server
	env      []string
	mu       sync.Mutex
	vswitchd *harness.Proc
}

var (
	gwMAC = mac("0a:58:ac:12:00:01")
	gwIP  = netip.MustParseAddr("172.18.0.1")
	extIP = netip.MustParseAddr("172.18.0.100")
)

const (
	physPort  = 1
	patchPort = 2
)

func startOVS(t *testing.T, ctx context.Context) *ovsNode {
	harness.Require(t, "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ip", "ethtool", "ping")
	// The database first: it then outlives the run's ovs-vswitchd at the test's end.
	db := ovsdbtest.Start(t, ovsdbtest.VSwitch)
	db.Exec(t, "ovs-vsctl", "--no-wait", "init")
	r := harness.NewTestRun(t)
	var err error
	n := &ovsNode{t: t, r: r, dir: r.Path("of"), db: db}
	n.env = []string{"OVS_RUNDIR=" + n.dir, "OVS_DBDIR=" + n.dir, "OVS_SYSCONFDIR=" + n.dir, "OVS_LOGDIR=" + r.LogDir}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if n.netns, err = r.AddNetns("of"); err != nil {
		t.Fatal(err)
	}
	if n.extNS, err = r.AddNetns("ext"); err != nil {
		t.Fatal(err)
	}
	n.startVswitchd(ctx)

	// The underlay: eth0 here, ext0 in the external namespace. Checksum offload off on both
	// ends, or TCP fails through the userspace datapath (recipes/README.md).
	n.run("ip", "-n", n.netns, "link", "add", "eth0", "type", "veth", "peer", "name", "ext0", "netns", n.extNS)
	for _, x := range [][]string{
		{n.netns, "ethtool", "-K", "eth0", "tx", "off"}, {n.netns, "ip", "link", "set", "eth0", "up"},
		{n.extNS, "ethtool", "-K", "ext0", "tx", "off"}, {n.extNS, "ip", "link", "set", "ext0", "up"},
		{n.extNS, "ip", "addr", "add", extIP.String() + "/24", "dev", "ext0"},
	} {
		if _, err := harness.Exec(ctx, x[0], x[1], x[2:]...); err != nil {
			t.Fatal(err)
		}
	}
	n.vsctl("--", "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
		fmt.Sprintf("other_config:hwaddr=%q", gwMAC.String()),
		"--", "add-port", "br-phy", "eth0", "--", "set", "interface", "eth0", fmt.Sprintf("ofport_request=%d", physPort),
		"--", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev", "fail_mode=secure",
		"--", "add-port", "br-phy", "patch-phy", "--", "set", "interface", "patch-phy", "type=patch",
		"options:peer=patch-int", fmt.Sprintf("ofport_request=%d", patchPort),
		"--", "add-port", "br-int", "patch-int", "--", "set", "interface", "patch-int", "type=patch", "options:peer=patch-phy",
		"--", "add-br", "br-ref", "--", "set", "bridge", "br-ref", "datapath_type=netdev")
	n.waitBridges(ctx)
	for port, want := range map[string]string{"eth0": "1", "patch-phy": "2"} {
		if got := strings.TrimSpace(n.vsctl("get", "interface", port, "ofport")); got != want {
			t.Fatalf("ofport of %s is %s, want %s", port, got, want)
		}
	}
	for _, args := range [][]string{
		{"addr", "add", gwIP.String() + "/24", "dev", "br-phy"}, {"link", "set", "br-phy", "up"},
	} {
		if _, err := harness.Exec(ctx, n.netns, "ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *ovsNode) startVswitchd(ctx context.Context) {
	p, err := n.r.Start(harness.ProcSpec{
		Name: "ovs-vswitchd", Path: "ovs-vswitchd", Netns: n.netns, Env: n.env, Dir: n.dir,
		Args: []string{n.db.Remote, "--unixctl=" + n.ctl(), "--no-chdir",
			"--log-file=" + filepath.Join(n.r.LogDir, "ovs-vswitchd.log"), "-vconsole:err", "-vsyslog:off"},
	})
	if err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.vswitchd = p
	n.mu.Unlock()
	poll.Eventually(n.t, ctx, "ovs-vswitchd", 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		select {
		case <-p.Done():
			n.t.Fatalf("ovs-vswitchd exited: %v", p.Err())
		default:
		}
		_, err := n.try("ovs-appctl", "--timeout=5", "-t", n.ctl(), "version")
		return err == nil, err
	})
	n.waitBridges(ctx)
}

// waitBridges waits until every bridge of the database answers OpenFlow on its management
// socket. ovs-vswitchd answers ovs-appctl before it has read the database and made the
// bridges; until then a restarted one's <bridge>.mgmt is its predecessor's file, which
// refuses connections, to ovs-ofctl and to the Client alike. The probe is an OpenFlow
// handshake (ovs-ofctl probe), not a bare connect, which ovs-vswitchd would log as a
// dropped connection.
func (n *ovsNode) waitBridges(ctx context.Context) {
	n.t.Helper()
	for _, br := range strings.Fields(n.vsctl("list-br")) {
		poll.Eventually(n.t, ctx, "OpenFlow on "+br+".mgmt", 20*time.Second, 20*time.Millisecond, func() (bool, error) {
			_, err := n.try("ovs-ofctl", "--timeout=5", "-O", "OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15", "probe", br)
			return err == nil, err
		})
	}
}

// restartVswitchd kills ovs-vswitchd as a crash would and starts it again; the bridges come
// back from the database, without flows. It returns once they accept OpenFlow connections.
func (n *ovsNode) restartVswitchd(ctx context.Context) {
	n.mu.Lock()
	p := n.vswitchd
	n.mu.Unlock()
	p.Kill()
	n.startVswitchd(ctx)
}

func (n *ovsNode) ctl() string { return filepath.Join(n.dir, "ovs-vswitchd.ctl") }

func (n *ovsNode) mgmt(bridge string) string {
	return "unix:" + filepath.Join(n.dir, bridge+".mgmt")
}

func (n *ovsNode) try(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), n.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (n *ovsNode) run(name string, args ...string) string {
	n.t.Helper()
	out, err := n.try(name, args...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

func (n *ovsNode) vsctl(args ...string) string {
	n.t.Helper()
	return n.run("ovs-vsctl", append([]string{"--db=" + n.db.Remote, "--timeout=20"}, args...)...)
}

// ofctl runs ovs-ofctl; bridge names resolve to <dir>/<bridge>.mgmt through OVS_RUNDIR.
func (n *ovsNode) ofctl(args ...string) string {
	n.t.Helper()
	return n.run("ovs-ofctl", append([]string{"-O", "OpenFlow14"}, args...)...)
}

func (n *ovsNode) appctl(args ...string) string {
	n.t.Helper()
	return n.run("ovs-appctl", append([]string{"--timeout=10", "-t", n.ctl()}, args...)...)
}

// dumpFlows is `ovs-ofctl dump-flows BRIDGE [FILTER] --no-stats`, one flow per line,
// leading blanks and the header line removed.
func (n *ovsNode) dumpFlows(bridge string, filter ...string) []string {
	n.t.Helper()
	out := n.ofctl(append(append([]string{"dump-flows", bridge}, filter...), "--no-stats")...)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST_FLOW") {
			lines = append(lines, l)
		}
	}
	return lines
}

func (n *ovsNode) client(opts Options) *Client {
	n.t.Helper()
	if opts.Logf == nil {
		opts.Logf = n.t.Logf
	}
	c, err := New(n.mgmt("br-phy"), opts)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

// logBuffer collects a client's log lines (and passes them on) for assertions.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	t     *testing.T
}

func (b *logBuffer) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, fmt.Sprintf(format, args...))
	b.t.Logf(format, args...)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
