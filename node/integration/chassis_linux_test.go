package integration

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestChassisRegistration runs ovnt-node on two bare nodes (no chassis settings, the node
// IP on eth0) and checks that ovn-controller, started afterwards, registers both chassis
// with GENEVE encaps on the node IPs, that the Nodes carry the chassis annotation, and that
// restarting the agent changes nothing.
func TestChassisRegistration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	e := newEnv(ctx, t, "node1", "node2")
	t.Logf("environment up after %v", time.Since(t0).Round(time.Millisecond))
	n1, n2 := e.nodes[0], e.nodes[1]
	// An existing system-id is the chassis' identity in the SB: the agent must keep it. The
	// SB's ovn-controller role then wants a certificate for that name: with node2's, the
	// agent refuses to start and says why.
	if _, err := n2.VSCtl(ctx, "set", "Open_vSwitch", ".", "external_ids:system-id=chassis-two"); err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Start(harness.ProcSpec{Name: "ovnt-node-node2-wrong-cert", Netns: n2.Netns, Path: nodeBin, Args: e.agentArgs(n2)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("ovnt-node with a certificate for another chassis kept running")
	}
	out, _ := os.ReadFile(filepath.Join(e.r.LogDir, "ovnt-node-node2-wrong-cert.out"))
	if want := `is for "node2", but this chassis is "chassis-two"`; !strings.Contains(string(out), want) {
		t.Errorf("ovnt-node with node2's certificate on chassis chassis-two: output lacks %q:\n%s", want, out)
	}
	if n2.SBCert, err = e.central.PKI.IssueChassis("chassis-two"); err != nil {
		t.Fatal(err)
	}
	ta := time.Now()
	for _, n := range e.nodes {
		e.startAgent(ctx, n)
	}
	t.Logf("two agents configured their chassis in %v", time.Since(ta).Round(time.Millisecond))

	// Without ovn-controller the node cannot serve pods: STATUS says "not available".
	_, err = cni.NewClient(dialer(n1.socket)).Do(ctx, cni.Request{Command: "STATUS", StdinData: []byte(`{"cniVersion":"1.1.0"}`)})
	if code := cniCode(err); code != 50 {
		t.Errorf("STATUS before ovn-controller runs: %v (code %d), want code 50", err, code)
	}
	for _, n := range e.nodes {
		checkChassisSettings(ctx, t, e, n)
	}

	tc := time.Now()
	e.startControllers(ctx)
	want := map[string]string{"node1": "geneve " + n1.IP, "chassis-two": "geneve " + n2.IP}
	err = poll.Until(ctx, "both chassis in the SB", 100*time.Millisecond, func() (bool, error) {
		show, err := e.central.SBCtl(ctx, "show")
		got := harness.ChassisEncaps(show)
		for ch, enc := range want {
			if len(got[ch]) != 1 || got[ch][0] != enc {
				return false, err
			}
		}
		return len(got) == 2, err
	})
	if err != nil {
		show, _ := e.central.SBCtl(ctx, "show")
		t.Fatalf("%v\novn-sbctl show:\n%s", err, show)
	}
	t.Logf("both chassis registered %v after ovn-controller started", time.Since(tc).Round(time.Millisecond))
	e.waitReady(ctx)

	// Restart: same database rows (same UUIDs), same addresses and routes, same annotation.
	before := snapshot(ctx, t, e, n1)
	tr := time.Now()
	n1.agent.Stop()
	e.startAgent(ctx, n1)
	e.waitReady(ctx)
	t.Logf("agent restart until ready: %v", time.Since(tr).Round(time.Millisecond))
	if after := snapshot(ctx, t, e, n1); after != before {
		t.Errorf("restarting the agent changed node1:\n--- before\n%s\n--- after\n%s", before, after)
	}
	if out, err := n2.Exec(ctx, "ping", "-c1", "-w5", n1.IP); err != nil {
		t.Errorf("node2 -> node1 after the agent's restart: %v\n%s", err, out)
	}
}

// checkChassisSettings checks what the agent wrote into the node's database, its network
// configuration and its Node.
func checkChassisSettings(ctx context.Context, t *testing.T, e *env, n *node) {
	t.Helper()
	ids := map[string]string{
		"hostname": n.Name, "ovn-remote": n.SBRemote, "ovn-encap-type": "geneve",
		"ovn-encap-ip": n.IP, "ovn-bridge-mappings": contract.PhysicalNetwork + ":br-phy", "ovn-bridge-datapath-type": "netdev",
		"ovn-remote-probe-interval": "60000",
	}
	for k, v := range ids {
		out, err := n.VSCtl(ctx, "get", "Open_vSwitch", ".", "external_ids:"+k)
		if got := strings.Trim(strings.TrimSpace(out), `"`); err != nil || got != v {
			t.Errorf("%s: external_ids:%s = %q (%v), want %q", n.Name, k, got, err, v)
		}
	}
	for col, v := range map[string]string{"datapath_type": "netdev", "fail_mode": "secure", "other_config:disable-in-band": `"true"`} {
		out, err := n.VSCtl(ctx, "get", "Bridge", "br-int", col)
		if err != nil || strings.TrimSpace(out) != v {
			t.Errorf("%s: br-int %s = %q (%v), want %s", n.Name, col, out, err, v)
		}
	}
	if out, err := n.VSCtl(ctx, "list-ports", "br-phy"); err != nil || strings.TrimSpace(out) != "eth0" {
		t.Errorf("%s: br-phy ports %q (%v), want eth0", n.Name, out, err)
	}
	if out, err := n.Exec(ctx, "ip", "-4", "-o", "addr", "show", "dev", "br-phy"); err != nil || !strings.Contains(out, n.IP+"/24") {
		t.Errorf("%s: br-phy does not hold %s/24: %v %s", n.Name, n.IP, err, out)
	}
	if out, _ := n.Exec(ctx, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); strings.TrimSpace(out) != "" {
		t.Errorf("%s: eth0 kept an address: %s", n.Name, out)
	}
	if out, err := n.Exec(ctx, "ip", "route", "show", "default"); err != nil || !strings.Contains(out, "via "+harness.UnderlayGateway+" dev br-phy") {
		t.Errorf("%s: default route not via br-phy: %v %s", n.Name, err, out)
	}
	if out, err := n.Exec(ctx, "sysctl", "-n", "net.ipv4.conf.all.arp_ignore"); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("%s: arp_ignore %q (%v)", n.Name, out, err)
	}
	checkManagementPort(ctx, t, n)
	node, err := e.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := contract.ParseNodeChassis(node.Annotations[contract.NodeChassisKey])
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	sysID, _ := n.VSCtl(ctx, "get", "Open_vSwitch", ".", "external_ids:system-id")
	want := contract.NodeChassisInfo{ChassisID: strings.Trim(strings.TrimSpace(sysID), `"`), NodeIP: n.IP + "/24",
		GatewayMAC: n.MAC, NextHop: harness.UnderlayGateway, OS: "linux"}
	if info != want {
		t.Errorf("%s: chassis annotation %+v, want %+v", n.Name, info, want)
	}
}

// snapshot is the agent-owned state of a node, in a form that compares as text.
func snapshot(ctx context.Context, t *testing.T, e *env, n *node) string {
	t.Helper()
	var parts []string
	for _, q := range [][]string{
		{"--columns=_uuid,name,datapath_type,fail_mode,other_config,external_ids,ports", "list", "Bridge"},
		{"--columns=_uuid,name,type,mac,mtu_request,external_ids", "list", "Interface"},
		{"--columns=_uuid,external_ids,bridges", "list", "Open_vSwitch"},
	} {
		out, err := n.VSCtl(ctx, append([]string{"--format=csv", "--data=bare", "--no-headings"}, q...)...)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		parts = append(parts, lines...)
	}
	for _, args := range [][]string{{"-o", "addr"}, {"route"}, {"-o", "link"}} {
		out, err := n.Exec(ctx, "ip", args...)
		if err != nil {
			t.Fatal(err)
		}
		// IPv6 duplicate address detection ends on its own schedule: not a change. Nor is
		// iproute2's complaint (on standard error, which Exec returns too) about the peer
		// namespace of some other test's veth that the kernel is destroying meanwhile.
		var keep []string
		for _, l := range strings.Split(strings.ReplaceAll(out, " tentative", ""), "\n") {
			if !strings.HasPrefix(l, "Error: Peer netns reference is invalid") {
				keep = append(keep, l)
			}
		}
		parts = append(parts, strings.Join(keep, "\n"))
	}
	node, err := e.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(parts, node.Annotations[contract.NodeChassisKey]), "\n")
}

// checkManagementPort checks the management port: an internal port bound to k8s-<node>,
// whose device has the subnet's .2 with its MAC, MTU 1400, no TX checksum offload, and the
// cluster and service ranges routed through the .1.
func checkManagementPort(ctx context.Context, t *testing.T, n *node) {
	t.Helper()
	mp := contract.MgmtIfName(n.Name)
	if out, err := n.VSCtl(ctx, "get", "Interface", mp, "type", "external_ids:iface-id"); err != nil || out != "internal\n"+contract.ManagementPort(n.Name)+"\n" {
		t.Errorf("%s: management port in OVS: %q (%v)", n.Name, out, err)
	}
	mac := contract.MACFromIP(n.mgmtIP()).String()
	want := map[string][]string{
		"link":    {"link/ether " + mac, " mtu 1400 "},
		"addr":    {n.mgmtIP().String() + "/24"},
		"route":   {clusterCIDR + " via " + n.gateway().String(), serviceCIDR + " via " + n.gateway().String()},
		"ethtool": {"tx-checksumming: off"},
	}
	for what, subs := range want {
		var out string
		var err error
		if what == "ethtool" {
			out, err = n.Exec(ctx, "ethtool", "-k", mp)
		} else {
			out, err = n.Exec(ctx, "ip", what, "show", "dev", mp)
		}
		for _, sub := range subs {
			if err != nil || !strings.Contains(out, sub) {
				t.Errorf("%s: management port %s lacks %q (%v):\n%s", n.Name, what, sub, err, out)
			}
		}
	}
}
