package integration

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
	"github.com/ovn-transparent/ovn-transparent/test/recipe"
)

// gwCookie is gateway.Cookie as ovs-ofctl filters on it.
const gwCookie = "cookie=0x6f766e740001/-1"

// gatewayResync is the agents' --gateway-resync in this test.
const gatewayResync = time.Second

const (
	extPort  = 9000 // the external host's probe server
	hostPort = 9100 // a server of the node's own, on the node IP
	podPort  = 8080 // the pods' probe servers
	beyond   = "198.51.100.1"
)

// TestSharedGateway runs ovnt-node on two nodes whose uplink it moved into br-phy, plays the
// master's part of the shared gateway (join switch, GR_<node> on the node IP and MAC,
// ext_<node> with the localnet port breth0_<node>, routes, SNAT) as the recipe does, and
// checks the data path through the agent's br-phy rules: pod egress SNATed to the node IP,
// the host's own traffic alongside, GENEVE between pods; then what the rules are and that
// they come back after an operator deletes them, an agent restart and an ovs-vswitchd
// crash.
func TestSharedGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	e := newEnv(ctx, t, "node1", "node2")
	e.gatewayResync = gatewayResync
	ext, err := e.r.StartExternalHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An address beyond the underlay, reached through the GR's default route.
	if out, err := ext.Exec(ctx, "ip", "addr", "add", beyond+"/32", "dev", "lo"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, n := range e.nodes {
		e.startAgent(ctx, n)
	}
	e.startControllers(ctx)
	e.waitReady(ctx)
	n1, n2 := e.nodes[0], e.nodes[1]
	t.Logf("timing: two nodes ready after %v", time.Since(t0).Round(time.Millisecond))

	// Before the master made the gateway router: the host's part of the rules only.
	for _, n := range e.nodes {
		want := refFlows(ctx, t, n, hostOnlyText(ofport(ctx, t, n, "eth0"), n.MAC))
		waitBrPhy(ctx, t, n, "the host's rules", func(got []string) bool { return slices.Equal(got, want) })
	}
	ping(ctx, t, "node1 -> external host through the host's rules", n1.Netns, ext.IP)

	tg := time.Now()
	gws := masterGateways(ctx, t, e)
	patch := map[*node]int{}
	for _, n := range e.nodes {
		patch[n] = waitPatchPort(ctx, t, n)
		up := ofport(ctx, t, n, "eth0")
		want := refFlows(ctx, t, n, recipe.BrPhy(up, patch[n], gws[n].mac, netip.Addr{}, nil))
		waitBrPhy(ctx, t, n, "the recipe's rules", func(got []string) bool { return slices.Equal(got, want) })
	}
	t.Logf("timing: gateway routers created -> patch ports and both nodes' rules in place: %v", time.Since(tg).Round(time.Millisecond))

	a := e.newPod(ctx, t, n1, "gwa", 10, podOpts{})
	b := e.newPod(ctx, t, n2, "gwb", 10, podOpts{})
	add(ctx, t, e.runtime(t, n1, "1.1.0", t.TempDir()), a, "1.1.0")
	add(ctx, t, e.runtime(t, n2, "1.1.0", t.TempDir()), b, "1.1.0")
	serve(t, ext.Netns, &probe.Server{Name: "ext", TCP: []uint16{extPort}})
	serve(t, n1.Netns, &probe.Server{Name: "node1", TCP: []uint16{hostPort}})
	serve(t, b.netns, &probe.Server{Name: "default/gwb", TCP: []uint16{podPort}})
	extAddr := netip.AddrPortFrom(netip.MustParseAddr(ext.IP), extPort).String()

	checkDataPath := func(t *testing.T, when string) {
		t.Helper()
		// (a) pod egress leaves with the node IP, also when it goes beyond the underlay
		// (the GR's default route via the external host's second address).
		expectPeer(ctx, t, when+": pod a -> external host", a.netns, extAddr, "ext", n1.IP)
		expectPeer(ctx, t, when+": pod b -> external host", b.netns, extAddr, "ext", n2.IP)
		expectPeer(ctx, t, when+": pod a -> beyond the next hop", a.netns, beyond+":"+strconv.Itoa(extPort), "ext", n1.IP)
		ping(ctx, t, when+": pod a -> external host", a.netns, ext.IP)
		// (b) the host alongside, both ways.
		expectPeer(ctx, t, when+": node1 -> external host", n1.Netns, extAddr, "ext", n1.IP)
		ping(ctx, t, when+": node1 -> external host", n1.Netns, ext.IP)
		expectPeer(ctx, t, when+": external host -> node1", ext.Netns, n1.IP+":"+strconv.Itoa(hostPort), "node1", ext.IP)
		ping(ctx, t, when+": external host -> node1", ext.Netns, n1.IP)
		// (c) GENEVE between the nodes.
		expectPeer(ctx, t, when+": pod a -> pod b across nodes", a.netns, b.ip.Addr().String()+":"+strconv.Itoa(podPort), "default/gwb", a.ip.Addr())
		ping(ctx, t, when+": pod b -> pod a across nodes", b.netns, a.ip.Addr().String())
	}

	t.Run("data path", func(t *testing.T) {
		geneveBefore := packets(ctx, t, n1, "priority=205")
		checkDataPath(t, "first")
		// Conntrack in zone 64000 tells who opened what: the GR's ICMP (pod a's ping,
		// SNATed) with mark 1, the host's with mark 2.
		ct, err := n1.AppCtl(ctx, "ovs-vswitchd", "dpctl/dump-conntrack", "zone=64000")
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []string{
			`tcp,orig=\(src=172\.18\.0\.1,dst=172\.18\.0\.100,sport=\d+,dport=9000\),.*zone=64000,mark=1`,
			`tcp,orig=\(src=172\.18\.0\.1,dst=172\.18\.0\.100,sport=\d+,dport=9000\),.*zone=64000,mark=2`,
			`icmp,orig=\(src=172\.18\.0\.1,dst=172\.18\.0\.100,.*zone=64000,mark=1`,
			`icmp,orig=\(src=172\.18\.0\.1,dst=172\.18\.0\.100,.*zone=64000,mark=2`,
		} {
			if !regexp.MustCompile(re).MatchString(ct) {
				t.Errorf("node1 zone 64000 has no entry /%s/:\n%s", re, ct)
			}
		}
		if strings.Contains(ct, "10.244.") {
			t.Errorf("a pod address in zone 64000 (SNAT missed):\n%s", ct)
		}
		// The bridge's own interface keeps the uplink's MTU (OVS gives an internal port
		// the smallest MTU of the bridge's other ports; a patch port has none).
		for _, dev := range []string{"eth0", "br-phy"} {
			if out, err := n1.Exec(ctx, "ip", "-o", "link", "show", dev); err != nil || !strings.Contains(out, " mtu 1500 ") {
				t.Errorf("node1 %s: MTU not 1500 (%v): %s", dev, err, out)
			}
		}
		// GENEVE from node2 reached node1's host through the priority-205 rule.
		if after := packets(ctx, t, n1, "priority=205"); after <= geneveBefore {
			t.Errorf("GENEVE to node1: priority=205 n_packets %d -> %d", geneveBefore, after)
		}
	})

	t.Run("pods and host at once", func(t *testing.T) {
		// The pod's and the host's connections share IP and MAC; 20 of each, interleaved
		// from four goroutines: every answer must reach the one who asked.
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		run := func(what, netns, addr, wantName string, wantPeer any) {
			defer wg.Done()
			for i := range 20 {
				if err := peerIs(ctx, netns, addr, wantName, wantPeer); err != nil {
					errs <- fmt.Sprintf("%s #%d: %v", what, i, err)
				}
			}
		}
		wg.Add(4)
		t1 := time.Now()
		go run("pod a -> external", a.netns, extAddr, "ext", n1.IP)
		go run("node1 -> external", n1.Netns, extAddr, "ext", n1.IP)
		go run("external -> node1", ext.Netns, n1.IP+":"+strconv.Itoa(hostPort), "node1", ext.IP)
		go run("pod b -> external", b.netns, extAddr, "ext", n2.IP)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		t.Logf("timing: 80 concurrent TCP probes in %v", time.Since(t1).Round(time.Millisecond))
		// The external host knows the node IP by the shared MAC only.
		if out, _ := ext.Exec(ctx, "ip", "neigh", "show", n1.IP); !strings.Contains(out, "lladdr "+n1.MAC) {
			t.Errorf("external host's neighbour entry for %s: %q, want %s", n1.IP, out, n1.MAC)
		}
	})

	t.Run("rules come back after an operator deletes them", func(t *testing.T) {
		// An operator's own flow (another cookie) is none of the agent's business.
		ofctl(ctx, t, n1, "add-flow", "br-phy", "cookie=0x99,priority=1000,udp,tp_dst=9,actions=drop")
		want := brPhy(ctx, t, n1)
		for _, del := range [][]string{
			{"del-flows", "br-phy", "--strict", fmt.Sprintf("priority=50,ip,in_port=%d", ofport(ctx, t, n1, "eth0"))},
			{"del-flows", "br-phy", gwCookie},
		} {
			td := time.Now()
			ofctl(ctx, t, n1, del...)
			if got := brPhy(ctx, t, n1); slices.Equal(got, want) {
				t.Fatalf("%v deleted nothing", del)
			}
			waitBrPhy(ctx, t, n1, "rules back after "+strings.Join(del, " "), func(got []string) bool { return slices.Equal(got, want) })
			back := time.Since(td)
			t.Logf("timing: %s -> back after %v (resync %v)", strings.Join(del[2:], " "), back.Round(time.Millisecond), gatewayResync)
			if back > gatewayResync+2*time.Second {
				t.Errorf("rules back after %v, resync is %v", back, gatewayResync)
			}
		}
		if out := ofctl(ctx, t, n1, "dump-flows", "br-phy", "cookie=0x99/-1"); !strings.Contains(out, "tp_dst=9 actions=drop") {
			t.Errorf("the operator's flow is gone:\n%s", out)
		}
		ofctl(ctx, t, n1, "del-flows", "br-phy", "cookie=0x99/-1")
		checkDataPath(t, "after the deletions")
	})

	t.Run("agent restart changes nothing", func(t *testing.T) {
		before := brPhy(ctx, t, n1)
		tr := time.Now()
		n1.agent.Stop()
		e.startAgent(ctx, n1)
		e.waitReady(ctx)
		// Let the new agent's first sync and a periodic one pass, then check that every
		// flow is older than the restart: none was deleted or re-added.
		time.Sleep(gatewayResync + 500*time.Millisecond)
		since := time.Since(tr).Seconds()
		for _, l := range ofctlLines(ctx, t, n1, "dump-flows", "br-phy", gwCookie) {
			m := regexp.MustCompile(`duration=([0-9.]+)s`).FindStringSubmatch(l)
			if d, _ := strconv.ParseFloat(m[1], 64); d < since {
				t.Errorf("flow re-created by the restarted agent (%.1fs old, restart %.1fs ago): %s", d, since, l)
			}
		}
		if after := brPhy(ctx, t, n1); !slices.Equal(after, before) {
			t.Errorf("flows changed over the restart:\n%s\n---\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
		}
	})

	t.Run("ovs-vswitchd crash and restart", func(t *testing.T) {
		want := brPhy(ctx, t, n1)
		tk := time.Now()
		// RestartVSwitchd returns once the bridges' management sockets accept again: until
		// then ovs-ofctl (refFlows below) finds the killed daemon's socket file and is refused.
		if err := n1.RestartVSwitchd(ctx); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		t.Logf("timing: ovs-vswitchd killed and ready again (bridges included) after %v", up.Sub(tk).Round(time.Millisecond))
		// The bridge comes back with its default NORMAL flow only; the agent's OpenFlow
		// client reconnects and installs the set again (new port numbers, if any, come
		// through the database).
		upPort, patchPort := ofport(ctx, t, n1, "eth0"), waitPatchPort(ctx, t, n1)
		if want2 := refFlows(ctx, t, n1, recipe.BrPhy(upPort, patchPort, gws[n1].mac, netip.Addr{}, nil)); !slices.Equal(want2, want) {
			t.Logf("port numbers changed over the restart (uplink %d, patch %d)", upPort, patchPort)
			want = want2
		}
		waitBrPhy(ctx, t, n1, "rules after the restart", func(got []string) bool { return slices.Equal(got, want) })
		t.Logf("timing: rules back %v after ovs-vswitchd was ready", time.Since(up).Round(time.Millisecond))
		// ovn-controller re-installs br-int's flows on its own; wait for pod traffic first.
		poll.Eventually(t, ctx, "pod a -> external host after the restart", 30*time.Second, 200*time.Millisecond, func() (bool, error) {
			err := peerIs(ctx, a.netns, extAddr, "ext", n1.IP)
			return err == nil, err
		})
		t.Logf("timing: pod egress back %v after the kill", time.Since(tk).Round(time.Millisecond))
		checkDataPath(t, "after the ovs-vswitchd restart")
	})

	t.Run("uplink renumbered, patch port gone and back", func(t *testing.T) {
		// On node2: ovs-vswitchd renumbers a port whose ofport_request changes, as a
		// restart may; the database says so and the rules follow.
		tr := time.Now()
		if _, err := n2.VSCtl(ctx, "set", "Interface", "eth0", "ofport_request=7"); err != nil {
			t.Fatal(err)
		}
		want := refFlows(ctx, t, n2, recipe.BrPhy(7, patch[n2], gws[n2].mac, netip.Addr{}, nil))
		waitBrPhy(ctx, t, n2, "rules for uplink port 7", func(got []string) bool { return slices.Equal(got, want) })
		t.Logf("timing: uplink renumbered -> rules follow in %v", time.Since(tr).Round(time.Millisecond))
		expectPeer(ctx, t, "pod b -> external host, uplink renumbered", b.netns, extAddr, "ext", n2.IP)
		expectPeer(ctx, t, "node2 -> external host, uplink renumbered", n2.Netns, extAddr, "ext", n2.IP)

		// The master removes the localnet port: ovn-controller deletes the patch port and
		// the host's part of the rules stays.
		tl := time.Now()
		if _, err := e.central.NBCtl(ctx, "lsp-del", contract.LocalnetPort(n2.Name)); err != nil {
			t.Fatal(err)
		}
		want = refFlows(ctx, t, n2, hostOnlyText(7, n2.MAC))
		waitBrPhy(ctx, t, n2, "the host's rules without the patch port", func(got []string) bool { return slices.Equal(got, want) })
		t.Logf("timing: localnet port deleted -> host's rules only in %v", time.Since(tl).Round(time.Millisecond))
		expectPeer(ctx, t, "node2 -> external host without the patch port", n2.Netns, extAddr, "ext", n2.IP)
		expectPeer(ctx, t, "external host -> node1 meanwhile", ext.Netns, n1.IP+":"+strconv.Itoa(hostPort), "node1", ext.IP)

		tl = time.Now()
		e.applyNode(ctx, n2) // the master puts it back
		p := waitPatchPort(ctx, t, n2)
		want = refFlows(ctx, t, n2, recipe.BrPhy(7, p, gws[n2].mac, netip.Addr{}, nil))
		waitBrPhy(ctx, t, n2, "the recipe's rules with the new patch port", func(got []string) bool { return slices.Equal(got, want) })
		t.Logf("timing: localnet port back -> patch port %d and rules in %v", p, time.Since(tl).Round(time.Millisecond))
		poll.Eventually(t, ctx, "pod b -> external host with the patch port back", 30*time.Second, 200*time.Millisecond, func() (bool, error) {
			err := peerIs(ctx, b.netns, extAddr, "ext", n2.IP)
			return err == nil, err
		})
		expectPeer(ctx, t, "node2 -> external host with the patch port back", n2.Netns, extAddr, "ext", n2.IP)
		ping(ctx, t, "pod b -> pod a with node2's uplink renumbered", b.netns, a.ip.Addr().String())
	})
}

// gateway is what the master takes from a node's chassis annotation for its GR.
type gateway struct {
	chassis string
	nodeIP  netip.Prefix
	mac     string
	nextHop string
	joinIP  netip.Addr
}

// masterGateways creates what the master would for the shared gateway (master/topology's
// rows, as the recipe builds them) from the chassis annotation the agents wrote, and returns
// each node's gateway.
func masterGateways(ctx context.Context, t *testing.T, e *env) map[*node]gateway {
	t.Helper()
	gws := map[*node]gateway{}
	for _, n := range e.nodes {
		node, err := e.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := contract.ParseNodeChassis(node.Annotations[contract.NodeChassisKey])
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		joinIP := netip.AddrFrom4([4]byte{100, 64, 0, byte(n.index + 1)})
		if n.gw, err = topology.GatewayFrom(info, joinIP); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		gws[n] = gateway{chassis: info.ChassisID, nodeIP: netip.MustParsePrefix(info.NodeIP), mac: info.GatewayMAC,
			nextHop: info.NextHop, joinIP: joinIP}
		e.applyNode(ctx, n)
	}
	return gws
}

// hostOnlyText is the recipe's rules without the gateway router: those that name the patch
// port dropped, and what arrives for the shared MAC (not IP) goes to LOCAL alone.
func hostOnlyText(phys int, mac string) []string {
	const patch = 65000 // a number no rule uses otherwise
	var out []string
	for _, l := range recipe.BrPhy(phys, patch, mac, netip.Addr{}, nil) {
		switch {
		case strings.Contains(l, fmt.Sprintf("actions=output:%d,LOCAL", patch)):
			out = append(out, strings.Replace(l, fmt.Sprintf("output:%d,", patch), "", 1))
		case !strings.Contains(l, strconv.Itoa(patch)):
			out = append(out, l)
		}
	}
	return out
}

// refFlows installs text with ovs-ofctl on a bridge of n's own that nothing else uses and
// returns how ovs-vswitchd shows them: the oracle for what the agent installs on br-phy.
func refFlows(ctx context.Context, t *testing.T, n *node, text []string) []string {
	t.Helper()
	if _, err := n.VSCtl(ctx, "--may-exist", "add-br", "br-ref", "--", "set", "bridge", "br-ref", "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(f, []byte(strings.Join(text, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ofctl(ctx, t, n, "--bundle", "replace-flows", "br-ref", f)
	return recipe.StripCookies(ofctlLines(ctx, t, n, "dump-flows", "br-ref", "--no-stats"))
}

// brPhy is br-phy's flows, all of them (an empty bridge would show its cookie-0 NORMAL),
// without statistics and cookies, sorted.
func brPhy(ctx context.Context, t *testing.T, n *node) []string {
	t.Helper()
	return recipe.StripCookies(ofctlLines(ctx, t, n, "dump-flows", "br-phy", "--no-stats"))
}

// waitBrPhy polls br-phy's flows every 50 ms until ok accepts them, for up to 30 s.
func waitBrPhy(ctx context.Context, t *testing.T, n *node, what string, ok func([]string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last []string
	err := poll.Until(ctx, n.Name+": "+what, 50*time.Millisecond, func() (bool, error) {
		out, err := n.OFCtl(ctx, "-O", "OpenFlow14", "--no-names", "dump-flows", "br-phy", "--no-stats")
		if err != nil {
			return false, err
		}
		last = recipe.StripCookies(flowLines(out))
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("%v; br-phy has:\n  %s", err, strings.Join(last, "\n  "))
	}
}

func ofctl(ctx context.Context, t *testing.T, n *node, args ...string) string {
	t.Helper()
	out, err := n.OFCtl(ctx, append([]string{"-O", "OpenFlow14", "--no-names"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ofctlLines(ctx context.Context, t *testing.T, n *node, args ...string) []string {
	t.Helper()
	return flowLines(ofctl(ctx, t, n, args...))
}

// flowLines is a dump-flows output one flow a line, without the header and blanks.
func flowLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST_FLOW") {
			lines = append(lines, l)
		}
	}
	return lines
}

// packets sums n_packets of n's br-phy flows that contain sub.
func packets(ctx context.Context, t *testing.T, n *node, sub string) int {
	t.Helper()
	sum := 0
	for _, l := range ofctlLines(ctx, t, n, "dump-flows", "br-phy", gwCookie) {
		if m := regexp.MustCompile(`n_packets=(\d+),`).FindStringSubmatch(l); m != nil && strings.Contains(l, sub) {
			v, _ := strconv.Atoi(m[1])
			sum += v
		}
	}
	return sum
}

// ofport is the OpenFlow number of n's interface iface, from the database.
func ofport(ctx context.Context, t *testing.T, n *node, iface string) int {
	t.Helper()
	out, err := n.VSCtl(ctx, "get", "Interface", iface, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || p <= 0 {
		t.Fatalf("%s: ofport of %s: %q", n.Name, iface, out)
	}
	return p
}

// waitPatchPort waits for the patch port ovn-controller makes on br-phy for the node's
// localnet port, and returns its OpenFlow number.
func waitPatchPort(ctx context.Context, t *testing.T, n *node) int {
	t.Helper()
	var port int
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := poll.Until(ctx, n.Name+": localnet patch port on br-phy", 50*time.Millisecond, func() (bool, error) {
		// ovn-controller marks the Port rows of both ends, not the Interfaces.
		marked, err := n.VSCtl(ctx, "--bare", "--columns=name", "find", "Port", "external_ids:ovn-localnet-port="+contract.LocalnetPort(n.Name))
		if err != nil {
			return false, err
		}
		onBrPhy, err := n.VSCtl(ctx, "list-ports", "br-phy")
		if err != nil {
			return false, err
		}
		name := ""
		for _, p := range strings.Fields(marked) {
			if slices.Contains(strings.Fields(onBrPhy), p) {
				name = p
			}
		}
		if name == "" {
			return false, nil
		}
		out, err := n.VSCtl(ctx, "get", "Interface", name, "ofport")
		if err != nil {
			return false, err
		}
		port, _ = strconv.Atoi(strings.TrimSpace(out))
		return port > 0, nil
	})
	if err != nil {
		show, _ := n.VSCtl(context.Background(), "--columns=name,external_ids,interfaces", "list", "Port")
		t.Fatalf("%v\novs-vsctl show:\n%s", err, show)
	}
	return port
}

// serve starts srv in netns until the test ends.
func serve(t *testing.T, netns string, srv *probe.Server) {
	t.Helper()
	if err := harness.InNetns(netns, srv.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
}

// peerIs makes one TCP probe from netns to addr and checks who answered and which client
// address it saw.
func peerIs(ctx context.Context, netns, addr, wantName string, wantPeer any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var line string
	err := harness.InNetns(netns, func() (err error) {
		line, err = probe.TCP(ctx, addr)
		return err
	})
	if err != nil {
		return err
	}
	name, peer, err := probe.ParseLine(line)
	if err != nil {
		return err
	}
	if want := fmt.Sprint(wantPeer); name != wantName || peer.String() != want {
		return fmt.Errorf("answer %q, want %s seeing %s", line, wantName, want)
	}
	return nil
}

func expectPeer(ctx context.Context, t *testing.T, what, netns, addr, wantName string, wantPeer any) {
	t.Helper()
	if err := peerIs(ctx, netns, addr, wantName, wantPeer); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}
