package conformance

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
	"sync/atomic"

	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
)

// The data-path half of a differing probe's explanation (explain gives OVN's logical
// verdict): what the nodes' Open vSwitch did with the probe's packets. For each node of the
// two pods: the conntrack zone of each pod's logical port, as ovn-controller holds it
// (ct-zone-list) and as br-int's external_ids store it, with any zone two names share; every
// connection each pod's zone tracks; the node's conntrack counters; the datapath flows that
// carry the pair's packets; whether the harness had to restart the node's ovs-vswitchd
// (which loses every tracked connection). Then ofproto/trace of the real packets on br-int:
// the first packet from the source pod with conntrack saying new in each zone, and the
// destination's reply with conntrack saying est+rpl (the connection was tracked) and new
// (the connection was lost). Full traces go to the run's log directory.

// zoneMap maps a conntrack zone's owner (a logical port, or "<datapath>_dnat"/"_snat") to
// the zone.
type zoneMap map[string]int

// parseZoneList reads ovn-controller's ct-zone-list: one "<name> <zone>" per line.
func parseZoneList(out string) zoneMap {
	m := zoneMap{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if z, err := strconv.Atoi(f[1]); err == nil {
			m[f[0]] = z
		}
	}
	return m
}

var bridgeZoneRE = regexp.MustCompile(`"?ct-zone-([^=",{}\s]+)"?="?(\d+)"?`)

// parseBridgeZones reads the ct-zone-<name>=<zone> keys of br-int's external_ids (ovs-vsctl
// get Bridge br-int external_ids), where ovn-controller keeps its zones across restarts.
func parseBridgeZones(out string) zoneMap {
	m := zoneMap{}
	for _, s := range bridgeZoneRE.FindAllStringSubmatch(out, -1) {
		if z, err := strconv.Atoi(s[2]); err == nil {
			m[s[1]] = z
		}
	}
	return m
}

// sharedZones lists every zone that more than one name holds, as "zone N: a, b", sorted.
// Two logical ports in one zone share their connections: a packet between them is tracked
// twice in the same table.
func sharedZones(m zoneMap) []string {
	by := map[int][]string{}
	for name, z := range m {
		by[z] = append(by[z], name)
	}
	var out []string
	for z, names := range by {
		if len(names) > 1 {
			slices.Sort(names)
			out = append(out, fmt.Sprintf("zone %d: %s", z, strings.Join(names, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// zoneDisagreements lists the names whose zone differs between ovn-controller's memory
// (ctl) and br-int's external_ids (db), or that only one of them has, sorted.
func zoneDisagreements(ctl, db zoneMap) []string {
	var out []string
	for name, z := range ctl {
		if d, ok := db[name]; !ok {
			out = append(out, fmt.Sprintf("%s: ovn-controller zone %d, not in br-int's external_ids", name, z))
		} else if d != z {
			out = append(out, fmt.Sprintf("%s: ovn-controller zone %d, br-int's external_ids zone %d", name, z, d))
		}
	}
	for name, d := range db {
		if _, ok := ctl[name]; !ok {
			out = append(out, fmt.Sprintf("%s: br-int's external_ids zone %d, unknown to ovn-controller", name, d))
		}
	}
	slices.Sort(out)
	return out
}

// datapathActions is what a trace ends with: its "Datapath actions:" lines in order (one
// per recirculation), the last one the packet's fate.
func datapathActions(trace string) []string {
	var out []string
	for _, l := range strings.Split(trace, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "Datapath actions: "); ok {
			out = append(out, a)
		}
	}
	return out
}

// ctlController runs ovs-appctl against node n's ovn-controller, on the node or, for a
// remote chassis, on its controller host.
func ctlController(ctx context.Context, n *cluster.Node, args ...string) (string, error) {
	if n.Remote != nil {
		return n.Remote.AppCtl(ctx, args...)
	}
	return n.AppCtl(ctx, "ovn-controller", args...)
}

// tracePod is one end of a probe: its logical port, node, addresses and br-int port.
type tracePod struct {
	key    string // "<ns>/<pod>"
	lport  string
	node   *cluster.Node
	ip     netip.Addr
	mac    string
	ofport string
}

// logSeq numbers the files logFile names.
var logSeq atomic.Int64

// logFile is a new file name in the run's log directory (kept when the run fails).
func (r *runner) logFile(what string) string {
	return filepath.Join(r.cl.Run.LogDir, fmt.Sprintf("conformance-%03d-%s.txt", logSeq.Add(1), what))
}

// counterPrefixes select the coverage counters of ovs-vswitchd that explain a data path:
// its connection tracker's, and its revalidators' (which keep the datapath flow cache in
// step with the OpenFlow tables).
var counterPrefixes = []string{"conntrack", "revalidate", "ukey", "upcall", "dumped", "handler_duplicate", "dpif_flow"}

// explainDataPath is the data-path half of probe j's explanation; from and to are the two
// pods.
func (r *runner) explainDataPath(ctx context.Context, j *probe.Job, from, to *corev1.Pod) string {
	var b strings.Builder
	src, err := r.tracePod(ctx, from, j.FromIP)
	if err != nil {
		fmt.Fprintf(&b, "data path: %s: %v\n", j.FromKey, err)
		return b.String()
	}
	dst, err := r.tracePod(ctx, to, j.ToIP)
	if err != nil {
		fmt.Fprintf(&b, "data path: %s: %v\n", j.ToKey, err)
		return b.String()
	}
	nodes := []*cluster.Node{src.node}
	if dst.node != src.node {
		nodes = append(nodes, dst.node)
	}
	crashes := r.cl.Run.Crashes()
	for _, n := range nodes {
		var pods []tracePod
		for _, p := range []tracePod{src, dst} {
			if p.node == n {
				pods = append(pods, p)
			}
		}
		b.WriteString(r.explainNode(ctx, n, pods, src.ip, dst.ip, crashes))
	}
	l4 := map[corev1.Protocol]string{corev1.ProtocolTCP: "tcp", corev1.ProtocolUDP: "udp", corev1.ProtocolSCTP: "sctp"}[j.Protocol]
	fwdFlags, rplFlags := "", ""
	if j.Protocol == corev1.ProtocolTCP {
		fwdFlags, rplFlags = ",tcp_flags=syn", ",tcp_flags=syn|ack"
	}
	// The first hop's destination MAC: the other pod's on the same node switch, else the
	// node switch's router port.
	fwdDst, rplDst := dst.mac, src.mac
	if src.node != dst.node {
		var err error
		if fwdDst, err = r.routerMAC(ctx, src.node.Name); err != nil {
			fmt.Fprintf(&b, "router MAC of %s: %v\n", src.node.Name, err)
		}
		if rplDst, err = r.routerMAC(ctx, dst.node.Name); err != nil {
			fmt.Fprintf(&b, "router MAC of %s: %v\n", dst.node.Name, err)
		}
	}
	// <l4>_src/_dst, not tp_src/tp_dst: ofproto/trace refuses tp_* for udp and sctp.
	fwd := fmt.Sprintf("in_port=%s,%s,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,%s_src=40000,%s_dst=%d%s",
		src.ofport, l4, src.mac, fwdDst, src.ip, dst.ip, l4, l4, j.ResolvedPort, fwdFlags)
	rpl := fmt.Sprintf("in_port=%s,%s,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,%s_src=%d,%s_dst=40000%s",
		dst.ofport, l4, dst.mac, rplDst, dst.ip, src.ip, l4, j.ResolvedPort, l4, rplFlags)
	for _, t := range []struct {
		what string
		n    *cluster.Node
		flow string
		ct   string
	}{
		{"first packet " + src.key + " -> " + dst.key + ", conntrack new in every zone", src.node, fwd, "trk,new"},
		{"reply " + dst.key + " -> " + src.key + ", conntrack est+rpl (connection tracked)", dst.node, rpl, "trk,est,rpl"},
		{"reply " + dst.key + " -> " + src.key + ", conntrack new (connection lost)", dst.node, rpl, "trk,new"},
	} {
		b.WriteString(r.ofprotoTrace(ctx, t.n, t.what, t.flow, t.ct))
	}
	return b.String()
}

// tracePod looks up pod p's br-int port on its node.
func (r *runner) tracePod(ctx context.Context, p *corev1.Pod, ip string) (tracePod, error) {
	n := r.cl.Node(p.Spec.NodeName)
	if n == nil {
		return tracePod{}, fmt.Errorf("unknown node %q", p.Spec.NodeName)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return tracePod{}, err
	}
	t := tracePod{key: p.Namespace + "/" + p.Name, lport: contract.PodPort(p.Namespace, p.Name), node: n, ip: addr, mac: contract.MACFromIP(addr).String()}
	out, err := n.VSCtl(ctx, "--bare", "--columns=ofport", "find", "Interface", "external_ids:iface-id="+t.lport)
	if err != nil {
		return tracePod{}, fmt.Errorf("br-int port of %s: %w", t.lport, err)
	}
	if t.ofport = strings.TrimSpace(out); t.ofport == "" {
		return tracePod{}, fmt.Errorf("no br-int interface has iface-id %s on %s", t.lport, n.Name)
	}
	return t, nil
}

func (r *runner) routerMAC(ctx context.Context, node string) (string, error) {
	out, err := r.cl.Central.NBCtl(ctx, "--bare", "--columns=mac", "find", "Logical_Router_Port", "name="+contract.NodeRouterPort(node))
	return strings.TrimSpace(out), err
}

// explainNode is node n's part: pods are the probe's pods on n; a and b the probe's
// addresses; crashes the run's daemon crashes so far.
func (r *runner) explainNode(ctx context.Context, n *cluster.Node, pods []tracePod, a, b netip.Addr, crashes []string) string {
	var s strings.Builder
	where := "its ovn-controller"
	if n.Remote != nil {
		where = "its remote ovn-controller (on " + n.Remote.IP + ")"
	}
	fmt.Fprintf(&s, "=== data path on %s, %s\n", n.Name, where)
	var own []string
	for _, c := range crashes {
		if strings.HasPrefix(c, "node "+n.Name+":") {
			own = append(own, c)
		}
	}
	if len(own) == 0 {
		fmt.Fprintf(&s, "ovs-vswitchd of %s: not restarted in this run\n", n.Name)
	} else {
		fmt.Fprintf(&s, "!!! ovs-vswitchd of %s was restarted in this run (every connection it tracked was lost):\n%s\n", n.Name, strings.Join(own, "\n"))
	}
	ctlOut, ctlErr := ctlController(ctx, n, "ct-zone-list")
	dbOut, dbErr := n.VSCtl(ctx, "get", "Bridge", "br-int", "external_ids")
	ctl, db := parseZoneList(ctlOut), parseBridgeZones(dbOut)
	if ctlErr != nil {
		fmt.Fprintf(&s, "ct-zone-list: %v\n", ctlErr)
	}
	if dbErr != nil {
		fmt.Fprintf(&s, "br-int external_ids: %v\n", dbErr)
	}
	for _, shared := range sharedZones(ctl) {
		fmt.Fprintf(&s, "!!! ovn-controller gives two names one conntrack zone: %s\n", shared)
	}
	if ctlErr == nil && dbErr == nil {
		for _, d := range zoneDisagreements(ctl, db) {
			fmt.Fprintf(&s, "!!! zone disagreement: %s\n", d)
		}
	}
	for _, p := range pods {
		z, ok := ctl[p.lport]
		if !ok {
			fmt.Fprintf(&s, "!!! %s (%s, br-int port %s) has no conntrack zone in ovn-controller\n", p.key, p.lport, p.ofport)
			continue
		}
		out, err := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/dump-conntrack", fmt.Sprintf("zone=%d", z))
		lines := nonEmpty(out)
		fmt.Fprintf(&s, "zone %d = %s (%s, br-int port %s): %d connections tracked (err %v)\n", z, p.lport, p.key, p.ofport, len(lines), err)
		const most = 40
		if len(lines) > most {
			lines = append(lines[:most], fmt.Sprintf("(%d more)", len(lines)-most))
		}
		for _, l := range lines {
			fmt.Fprintf(&s, "  %s\n", l)
		}
	}
	if out, err := n.AppCtl(ctx, "ovs-vswitchd", "coverage/show"); err != nil {
		fmt.Fprintf(&s, "coverage/show: %v\n", err)
	} else {
		var ct []string
		for _, l := range nonEmpty(out) {
			if f := strings.Fields(l); len(f) > 0 && slices.ContainsFunc(counterPrefixes, func(p string) bool { return strings.HasPrefix(f[0], p) }) {
				ct = append(ct, f[0]+" "+f[len(f)-1])
			}
		}
		fmt.Fprintf(&s, "conntrack and revalidation counters of ovs-vswitchd (total): %s\n", strings.Join(ct, "; "))
	}
	if out, err := n.AppCtl(ctx, "ovs-vswitchd", "upcall/show"); err != nil {
		fmt.Fprintf(&s, "upcall/show: %v\n", err)
	} else {
		fmt.Fprintf(&s, "upcall/show: %s\n", strings.Join(strings.Fields(out), " "))
	}
	warns, err := vswitchdWarnings(filepath.Join(r.cl.Run.LogDir, n.Name+"-ovs-vswitchd.log"), maxWarnings)
	fmt.Fprintf(&s, "last warnings of ovs-vswitchd on %s (err %v): %d\n", n.Name, err, len(warns))
	for _, w := range warns {
		fmt.Fprintf(&s, "  %s\n", w)
	}
	nconns, _ := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/ct-get-nconns")
	maxconns, _ := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/ct-get-maxconns")
	fmt.Fprintf(&s, "connections tracked on %s: %s of at most %s\n", n.Name, strings.TrimSpace(nconns), strings.TrimSpace(maxconns))
	out, err := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/dump-flows", "-m")
	file := r.logFile("datapath-flows-" + n.Name)
	werr := os.WriteFile(file, []byte(out), 0o644)
	flows := pairFlows(out, a, b)
	fmt.Fprintf(&s, "datapath flows (megaflow cache) of %s naming both pods, or dropping either's packets (err %v): %d; all in %s (write err %v)\n",
		n.Name, err, len(flows), file, werr)
	for _, f := range flows {
		fmt.Fprintf(&s, "  %s\n", f)
	}
	return s.String()
}

// ofprotoTrace traces flow through node n's br-int, conntrack answering ct at every
// recirculation, saves the whole trace in the run's log directory and returns its end.
func (r *runner) ofprotoTrace(ctx context.Context, n *cluster.Node, what, flow, ct string) string {
	args := []string{"ofproto/trace", "br-int", flow}
	// OVN's pipelines recirculate through conntrack at most a few times per packet.
	for range 4 {
		args = append(args, "--ct-next", ct)
	}
	out, err := n.AppCtl(ctx, "ovs-vswitchd", args...)
	file := r.logFile("trace")
	werr := os.WriteFile(file, []byte("ovs-appctl "+strings.Join(args, " ")+"\n\n"+out), 0o644)
	acts := datapathActions(out)
	fate := "(none)"
	if len(acts) > 0 {
		fate = acts[len(acts)-1]
	}
	return fmt.Sprintf("ofproto/trace on %s, %s (err %v; whole trace in %s, write err %v):\n  %s\n  datapath actions per recirculation: %s\n  fate: %s\n",
		n.Name, what, err, file, werr, "ovs-appctl "+strings.Join(args, " "), strings.Join(acts, " | "), fate)
}

// maxWarnings bounds vswitchdWarnings in a failure.
const maxWarnings = 12

// vswitchdWarnings are the last most WARN and ERR lines of an ovs-vswitchd log, but for the
// netdev-only node's "failed to enumerate system datapaths" every second or two: a conntrack
// abort, a port gone, a datapath flow the revalidators could not change. Read before
// afterRecompute flushes the datapath flows, which makes the revalidators log the last kind.
func vswitchdWarnings(path string, most int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.Contains(l, "|WARN|") || strings.Contains(l, "|ERR|")) && !strings.Contains(l, "failed to enumerate system datapaths") {
			out = append(out, l)
		}
	}
	if len(out) > most {
		out = out[len(out)-most:]
	}
	return out, nil
}

func nonEmpty(out string) []string {
	var l []string
	for _, s := range strings.Split(out, "\n") {
		if strings.TrimSpace(s) != "" {
			l = append(l, s)
		}
	}
	return l
}

// pairFlows are the datapath flows (dpctl/dump-flows) that concern a pair of pods at
// addresses a and b: those that name both (by address or MAC), and the drops that name
// either (a megaflow may wildcard the addresses a packet was judged on, and a router's MAC
// replaces a pod's across nodes); at most maxPairFlows.
func pairFlows(dump string, a, b netip.Addr) []string {
	names := func(ip netip.Addr) []string {
		return []string{"src=" + ip.String() + ",", "dst=" + ip.String() + ",", "src=" + contract.MACFromIP(ip).String(), "dst=" + contract.MACFromIP(ip).String()}
	}
	mentions := func(l string, ip netip.Addr) bool {
		return slices.ContainsFunc(names(ip), func(n string) bool { return strings.Contains(l, n) })
	}
	var out []string
	for _, l := range nonEmpty(dump) {
		l = strings.TrimSpace(l)
		ma, mb := mentions(l, a), mentions(l, b)
		drop := strings.Contains(l, "actions:drop")
		if (ma && mb) || ((ma || mb) && drop) {
			out = append(out, l)
		}
	}
	if len(out) > maxPairFlows {
		out = append(out[:maxPairFlows], fmt.Sprintf("(%d more)", len(out)-maxPairFlows))
	}
	return out
}

// maxPairFlows bounds pairFlows.
const maxPairFlows = 30
