package conntrack

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// vswitchd is one real ovs-vswitchd (userspace datapath, dummy ports) whose conntrack
// entries the test makes with real packets through ct(commit,nat) flows: the same entries
// OVN's load balancers leave, in zones of their own.
type vswitchd struct {
	t   *testing.T
	dir string // OVS_RUNDIR: pidfile and ovs-vswitchd.<pid>.ctl, as a package install has
}

func startVswitchd(t *testing.T) *vswitchd {
	testenv.RequireRoot(t, "unshare", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")
	db := ovsdbtest.Start(t, ovsdbtest.VSwitch)
	db.Exec(t, "ovs-vsctl", "--no-wait", "init")
	v := &vswitchd{t: t, dir: t.TempDir()}
	// A network namespace of its own: the userspace datapath makes a tap device named
	// ovs-netdev, which another ovs-vswitchd on the host may hold already.
	cmd := exec.Command("unshare", "--net", "ovs-vswitchd", db.Remote, "--enable-dummy", "--disable-system", "--no-chdir",
		"--pidfile="+filepath.Join(v.dir, "ovs-vswitchd.pid"), "--log-file="+filepath.Join(v.dir, "ovs-vswitchd.log"),
		"-vconsole:off", "-vsyslog:off")
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+v.dir, "OVS_DBDIR="+v.dir, "OVS_SYSCONFDIR="+v.dir, "OVS_LOGDIR="+v.dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	poll.Eventually(t, context.Background(), "ovs-vswitchd answers", 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		_, err := appctl{v.dir}.call(context.Background(), "version")
		return err == nil, err
	})
	db.Exec(t, "ovs-vsctl", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
		"--", "add-port", "br0", "p1", "--", "set", "interface", "p1", "type=dummy", "ofport_request=1",
		"--", "add-port", "br0", "p2", "--", "set", "interface", "p2", "type=dummy", "ofport_request=2")
	poll.Eventually(t, context.Background(), "br0", 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		out, err := v.ctl("ovs-ofctl", "dump-flows", "br0")
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return true, nil
	})
	return v
}

func (v *vswitchd) ctl(cli string, args ...string) (string, error) {
	cmd := exec.Command(cli, args...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+v.dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (v *vswitchd) must(cli string, args ...string) string {
	v.t.Helper()
	out, err := v.ctl(cli, args...)
	if err != nil {
		v.t.Fatalf("%s %s: %v: %s", cli, strings.Join(args, " "), err, out)
	}
	return out
}

// send injects one UDP datagram src -> dst on p1.
func (v *vswitchd) send(src, dst netip.AddrPort) {
	v.t.Helper()
	v.must("ovs-appctl", "netdev-dummy/receive", "p1",
		"in_port(1),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0800),ipv4(src="+src.Addr().String()+
			",dst="+dst.Addr().String()+",proto=17,tos=0,ttl=64,frag=no),udp(src="+itoa(src.Port())+",dst="+itoa(dst.Port())+")")
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

var (
	vip      = netip.MustParseAddrPort("10.96.0.10:53")
	clientA  = netip.MustParseAddrPort("10.244.0.3:40000")
	clientB  = netip.MustParseAddrPort("10.244.0.4:40000")
	clientC  = netip.MustParseAddrPort("10.244.0.5:40000")
	goneBE   = netip.MustParseAddrPort("10.244.1.5:8080")
	keptBE   = netip.MustParseAddrPort("10.244.1.6:8080")
	otherDst = netip.MustParseAddrPort("10.244.9.9:53")
)

// entries makes the entries of a load balancer that sent clientA to goneBE (zone 7) and
// clientB to keptBE (zone 8), and one entry of clientC straight to a pod (zone 9).
func (v *vswitchd) entries() {
	v.must("ovs-ofctl", "add-flow", "br0", "in_port=1,udp,nw_src=10.244.0.3,nw_dst=10.96.0.10,tp_dst=53,actions=ct(commit,zone=7,nat(dst=10.244.1.5:8080)),output:2")
	v.must("ovs-ofctl", "add-flow", "br0", "in_port=1,udp,nw_src=10.244.0.4,nw_dst=10.96.0.10,tp_dst=53,actions=ct(commit,zone=8,nat(dst=10.244.1.6:8080)),output:2")
	v.must("ovs-ofctl", "add-flow", "br0", "in_port=1,udp,nw_dst=10.244.9.9,actions=ct(commit,zone=9),output:2")
	v.send(clientA, vip)
	v.send(clientB, vip)
	v.send(clientC, otherDst)
}

func TestDatapathDumpsAndDeletesOVSEntries(t *testing.T) {
	v := startVswitchd(t)
	v.entries()
	dp, err := NewDatapath(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conns, err := dp.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Conn{
		{Proto: 17, Zone: 7, OrigSrc: clientA, OrigDst: vip, ReplySrc: goneBE},
		{Proto: 17, Zone: 8, OrigSrc: clientB, OrigDst: vip, ReplySrc: keptBE},
		{Proto: 17, Zone: 9, OrigSrc: clientC, OrigDst: otherDst, ReplySrc: otherDst},
	}
	sortConns(conns)
	if !slices.Equal(conns, want) {
		t.Fatalf("dump:\n got %v\nwant %v", conns, want)
	}
	if err := dp.Delete(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if err := dp.Delete(ctx, want[0]); err != nil {
		t.Errorf("deleting an entry already gone: %v", err)
	}
	conns, err = dp.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sortConns(conns)
	if !slices.Equal(conns, want[1:]) {
		t.Fatalf("after deleting %v:\n got %v\nwant %v", want[0], conns, want[1:])
	}
}

// TestCleanerDeletesOnlyStaleEntries: of the Service's entries, the one whose backend is
// gone goes; the one to a current backend and the entry that is not the Service's stay.
func TestCleanerDeletesOnlyStaleEntries(t *testing.T) {
	v := startVswitchd(t)
	v.entries()
	dp, err := NewDatapath(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewCleaner(dp, testr.New(t))
	go c.Run(ctx)
	c.Set(Table{{17, vip}: {Service: "ns/dns", Backends: []netip.AddrPort{keptBE}}})
	var conns []Conn
	poll.Eventually(t, ctx, "the stale entry deleted", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		conns, err = dp.Dump(ctx)
		return err == nil && len(conns) == 2, err
	})
	sortConns(conns)
	want := []Conn{
		{Proto: 17, Zone: 8, OrigSrc: clientB, OrigDst: vip, ReplySrc: keptBE},
		{Proto: 17, Zone: 9, OrigSrc: clientC, OrigDst: otherDst, ReplySrc: otherDst},
	}
	if !slices.Equal(conns, want) {
		t.Fatalf("left:\n got %v\nwant %v", conns, want)
	}
	// The client's next datagram is balanced again (here: the zone-7 flow's NAT) and the
	// new entry is its backend's: the cleaner deletes it too only if that backend is gone.
	v.send(clientA, vip)
	conns, _ = dp.Dump(ctx)
	if len(conns) != 3 {
		t.Fatalf("after the client sent again: %v", conns)
	}
}

func sortConns(cs []Conn) {
	slices.SortFunc(cs, func(a, b Conn) int { return int(a.Zone) - int(b.Zone) })
}
