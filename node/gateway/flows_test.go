package gateway

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
)

var (
	nodeMAC  = mustMAC("0a:58:ac:12:00:01")
	otherMAC = mustMAC("0a:58:ac:12:00:64")
	bcast    = mustMAC("ff:ff:ff:ff:ff:ff")
	nodeIP   = netip.MustParseAddr("172.18.0.1")
	extIP    = netip.MustParseAddr("172.18.0.100")
)

const (
	upPort    = 1
	patchPort = 2
	hostPort  = 3 // the host vNIC's internal port, where the host's interface is one (Windows)
)

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func params(patch uint32, nps ...NodePort) Params {
	return Params{Ports: Ports{Uplink: upPort, Patch: patch}, MAC: nodeMAC, IP: nodeIP, Tunnel: TunnelFor("geneve"), NodePorts: nps}
}

// packet is what the tracer knows of a frame; ctState and ctMark are what conntrack says
// after a ct() lookup (the tracer cannot run conntrack).
type packet struct {
	in       uint32
	src, dst net.HardwareAddr
	ethType  uint16
	proto    uint8
	nwSrc    netip.Addr
	nwDst    netip.Addr
	tpSrc    uint16
	tpDst    uint16
	ctState  uint32
	ctMark   uint32
}

// matches is OpenFlow matching for the fields Flows uses.
func matches(m openflow.Match, p packet, tracked bool) bool {
	var state, mark uint32
	if tracked {
		state, mark = p.ctState|openflow.CTTrk, p.ctMark
	}
	switch {
	case m.InPort != 0 && m.InPort != p.in,
		m.EthSrc != nil && !bytes.Equal(m.EthSrc, p.src),
		m.EthDst != nil && !bytes.Equal(m.EthDst, p.dst),
		m.EthType != 0 && m.EthType != p.ethType,
		m.IPProto != 0 && m.IPProto != p.proto,
		m.IPv4Src.IsValid() && !m.IPv4Src.Contains(p.nwSrc),
		m.IPv4Dst.IsValid() && !m.IPv4Dst.Contains(p.nwDst),
		m.TPSrc != 0 && m.TPSrc != p.tpSrc,
		m.TPDst != 0 && m.TPDst != p.tpDst,
		state&m.CTStateMask != m.CTState,
		mark&m.CTMarkMask != m.CTMark:
		return false
	}
	return true
}

// trace follows p through flows as OVS would: the highest-priority match in table 0, and
// after a ct(table=N) the highest in N with the conntrack answer. It returns the actions
// taken, " | " between tables, and fails on two matches of equal priority (OVS would pick
// either).
func trace(t *testing.T, flows []openflow.Flow, p packet) string {
	t.Helper()
	var steps []string
	table, tracked := uint8(0), false
	for range 4 {
		var best *openflow.Flow
		for i := range flows {
			f := &flows[i]
			if f.Table != table || !matches(f.Match, p, tracked) {
				continue
			}
			if best != nil && f.Priority == best.Priority {
				t.Fatalf("ambiguous: %s and %s both match %+v", best, f, p)
			}
			if best == nil || f.Priority > best.Priority {
				best = f
			}
		}
		if best == nil {
			return strings.Join(append(steps, "drop (no flow)"), " | ")
		}
		steps = append(steps, actions(best))
		next, recirc := -1, false
		for _, a := range best.Actions {
			if ct, ok := a.(openflow.CT); ok && ct.Recirc {
				next, recirc = int(ct.Table), true
			}
		}
		if !recirc {
			return strings.Join(steps, " | ")
		}
		table, tracked = uint8(next), true
	}
	t.Fatalf("loop tracing %+v: %v", p, steps)
	return ""
}

func actions(f *openflow.Flow) string {
	s := f.String()
	return s[strings.Index(s, " actions=")+len(" actions="):]
}

func ipPkt(in uint32, src, dst net.HardwareAddr, proto uint8, from, to netip.Addr, sport, dport uint16) packet {
	return packet{in: in, src: src, dst: dst, ethType: openflow.EthTypeIPv4, proto: proto, nwSrc: from, nwDst: to, tpSrc: sport, tpDst: dport}
}

func withCT(p packet, state, mark uint32) packet {
	p.ctState, p.ctMark = state, mark
	return p
}

const (
	commitOVN  = "ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:1"
	commitHost = "ct(commit,zone=64000,exec(set_field:0x2->ct_mark)),output:1"
	lookup     = "ct(table=1,zone=64000)"
)

// TestFlowsDecide follows the frames of the shared gateway through the rules: who gets
// what the physical network sends to the shared MAC, and what each side sends out.
func TestFlowsDecide(t *testing.T) {
	tcp, udp, icmp := openflow.IPProtoTCP, openflow.IPProtoUDP, openflow.IPProtoICMP
	arp := packet{ethType: openflow.EthTypeARP}
	arpFrom := func(in uint32, src, dst net.HardwareAddr) packet {
		p := arp
		p.in, p.src, p.dst = in, src, dst
		return p
	}
	fromExt := func(proto uint8, sport, dport uint16) packet {
		return ipPkt(upPort, otherMAC, nodeMAC, proto, extIP, nodeIP, sport, dport)
	}
	const local, normal = "LOCAL", "NORMAL"
	for _, tc := range []struct {
		name      string
		p         packet
		withPatch string // decision with the patch port
		hostOnly  string // decision before it exists; "": no such frame (it comes from the patch port)
	}{
		{"GENEVE to the node: the host's tunnel endpoint, no conntrack", fromExt(udp, 51000, 6081), local, local},
		{"GENEVE for another MAC", ipPkt(upPort, otherMAC, bcast, udp, extIP, nodeIP, 1, 6081), normal, normal},
		{"GENEVE from the host", ipPkt(openflow.PortLocal, nodeMAC, otherMAC, udp, nodeIP, extIP, 51000, 6081), "output:1", "output:1"},
		{"pod egress (SNATed by the GR) is committed as OVN's",
			ipPkt(patchPort, nodeMAC, otherMAC, tcp, nodeIP, extIP, 40000, 9000), commitOVN, ""},
		{"host egress is committed as the host's",
			ipPkt(openflow.PortLocal, nodeMAC, otherMAC, tcp, nodeIP, extIP, 40000, 9000), commitHost, commitHost},
		{"reply to OVN goes to the patch port", withCT(fromExt(tcp, 9000, 40000), openflow.CTEst, markOVN),
			lookup + " | output:2", lookup + " | LOCAL"},
		{"ICMP error about an OVN connection too", withCT(fromExt(icmp, 0, 0), openflow.CTRel, markOVN),
			lookup + " | output:2", lookup + " | LOCAL"},
		{"reply to the host goes to LOCAL", withCT(fromExt(tcp, 9000, 40000), openflow.CTEst, markHost),
			lookup + " | LOCAL", lookup + " | LOCAL"},
		{"ICMP error about a host connection", withCT(fromExt(icmp, 0, 0), openflow.CTRel, markHost),
			lookup + " | LOCAL", lookup + " | LOCAL"},
		{"new connection to the node IP: the host's", withCT(fromExt(tcp, 40000, 22), openflow.CTNew, 0),
			lookup + " | LOCAL", lookup + " | LOCAL"},
		{"IP broadcast", withCT(ipPkt(upPort, otherMAC, bcast, udp, extIP, netip.MustParseAddr("172.18.0.255"), 1, 2), openflow.CTNew, 0),
			lookup + " | NORMAL", lookup + " | NORMAL"},
		{"ARP reply to the shared MAC: both owners", arpFrom(upPort, otherMAC, nodeMAC), "output:2,LOCAL", local},
		{"ARP request (broadcast)", arpFrom(upPort, otherMAC, bcast), normal, normal},
		{"ARP from the GR", arpFrom(patchPort, nodeMAC, bcast), normal, ""},
		{"ARP from the host", arpFrom(openflow.PortLocal, nodeMAC, bcast), normal, normal},
		{"another MAC from the localnet", arpFrom(patchPort, otherMAC, bcast), "drop", ""},
	} {
		// The same decisions with the host's interface a named port (Windows' host vNIC):
		// what came from or went to LOCAL comes from or goes to that port.
		for _, host := range []uint32{openflow.PortLocal, hostPort} {
			p := tc.p
			if p.in == openflow.PortLocal {
				p.in = host
			}
			for _, v := range []struct {
				patch uint32
				want  string
			}{{patchPort, tc.withPatch}, {0, tc.hostOnly}} {
				if v.want == "" {
					continue
				}
				want := v.want
				if host != openflow.PortLocal {
					want = strings.ReplaceAll(want, "LOCAL", fmt.Sprintf("output:%d", host))
				}
				params := params(v.patch)
				params.Host = host
				if got := trace(t, Flows(params), p); got != want {
					t.Errorf("%s (patch port %d, host port %#x):\n got %s\nwant %s", tc.name, v.patch, host, got, want)
				}
			}
		}
	}
}

func TestFlowsNodePortHook(t *testing.T) {
	np := NodePort{Protocol: openflow.IPProtoTCP, Port: 30080}
	in := ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, nodeIP, 40000, 30080)
	// The gateway router answers a NodePort from the address it knows it by.
	out := ipPkt(patchPort, nodeMAC, otherMAC, openflow.IPProtoTCP, contract.NodePortGatewayIP, extIP, 30080, 40000)
	for _, tc := range []struct {
		name    string
		p       Params
		in, out string
	}{
		{"no node ports", params(patchPort), lookup + " | LOCAL", commitOVN},
		{"node port 30080/tcp", params(patchPort, np), "set_field:169.254.100.1->ip_dst,output:2", "set_field:172.18.0.1->ip_src,output:1"},
		{"other protocol", params(patchPort, NodePort{Protocol: openflow.IPProtoUDP, Port: 30080}), lookup + " | LOCAL", commitOVN},
		{"no patch port: ignored", params(0, np), lookup + " | LOCAL", ""},
		{"IPv6 node address: ignored", func() Params { p := params(patchPort, np); p.IP = netip.MustParseAddr("fd00::1"); return p }(),
			lookup + " | LOCAL", commitOVN},
	} {
		for _, f := range Flows(tc.p) {
			if err := f.Validate(); err != nil {
				t.Errorf("%s: %s: %v", tc.name, f.String(), err)
			}
		}
		if got := trace(t, Flows(tc.p), withCT(in, openflow.CTNew, 0)); got != tc.in {
			t.Errorf("%s: to the node port: %s, want %s", tc.name, got, tc.in)
		}
		if got := trace(t, Flows(tc.p), out); tc.out != "" && got != tc.out {
			t.Errorf("%s: from the node port: %s, want %s", tc.name, got, tc.out)
		}
	}
}

// TestFlowsNodePortGRIP: a NodePort on the node IP reaches the gateway router at
// contract.NodePortGatewayIP and its answers leave from the node IP again; externalIPs are
// not rewritten.
func TestFlowsNodePortGRIP(t *testing.T) {
	gr := contract.NodePortGatewayIP
	vip := netip.MustParseAddr("192.0.2.10")
	p := params(patchPort, NodePort{Protocol: openflow.IPProtoTCP, Port: 30080}, NodePort{Protocol: openflow.IPProtoTCP, Port: 80, IP: vip})
	for _, f := range Flows(p) {
		if err := f.Validate(); err != nil {
			t.Errorf("%s: %v", f.String(), err)
		}
	}
	for _, tc := range []struct {
		name string
		p    packet
		want string
	}{
		{"to the NodePort", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, nodeIP, 40000, 30080), openflow.CTNew, 0),
			"set_field:169.254.100.1->ip_dst,output:2"},
		{"the GR's answer", ipPkt(patchPort, nodeMAC, otherMAC, openflow.IPProtoTCP, gr, extIP, 30080, 40000),
			"set_field:172.18.0.1->ip_src,output:1"},
		{"the GR's own connection from the node IP on that port", ipPkt(patchPort, nodeMAC, otherMAC, openflow.IPProtoTCP, nodeIP, extIP, 30080, 40000), commitOVN},
		{"to the externalIP", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, vip, 40000, 80), openflow.CTNew, 0), "output:2"},
		{"the externalIP's answer", ipPkt(patchPort, nodeMAC, otherMAC, openflow.IPProtoTCP, vip, extIP, 80, 40000), "output:1"},
	} {
		if got := trace(t, Flows(p), tc.p); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestFlowsIngressIP: an externalIP or LoadBalancer ingress IP with its port goes to the
// gateway router like a NodePort, and only that IP and port; the node IP's port stays the
// host's.
func TestFlowsIngressIP(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.10")
	np := NodePort{Protocol: openflow.IPProtoTCP, Port: 80, IP: vip}
	p := params(patchPort, np, NodePort{Protocol: openflow.IPProtoUDP, Port: 53, IP: netip.MustParseAddr("fd00::10")})
	for _, f := range Flows(p) {
		if err := f.Validate(); err != nil {
			t.Errorf("%s: %v", f.String(), err)
		}
		if strings.Contains(f.String(), "53") {
			t.Errorf("an IPv6 entry made a flow: %s", f.String())
		}
	}
	for _, tc := range []struct {
		name string
		p    packet
		want string
	}{
		{"to the VIP's port", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, vip, 40000, 80), openflow.CTNew, 0), "output:2"},
		{"the GR's answer from the VIP", ipPkt(patchPort, nodeMAC, otherMAC, openflow.IPProtoTCP, vip, extIP, 80, 40000), "output:1"},
		{"to the VIP, another port", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, vip, 40000, 81), openflow.CTNew, 0), lookup + " | LOCAL"},
		{"to the node IP on the VIP's port", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoTCP, extIP, nodeIP, 40000, 80), openflow.CTNew, 0), lookup + " | LOCAL"},
		{"to the VIP, UDP", withCT(ipPkt(upPort, otherMAC, nodeMAC, openflow.IPProtoUDP, extIP, vip, 40000, 80), openflow.CTNew, 0), lookup + " | LOCAL"},
	} {
		if got := trace(t, Flows(p), tc.p); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// The same entries in another order make the same flows once the controller sorts them.
	a := []NodePort{np, {Protocol: openflow.IPProtoTCP, Port: 80}, {Protocol: openflow.IPProtoSCTP, Port: 80}}
	b := []NodePort{a[2], a[0], a[1]}
	slices.SortFunc(a, NodePort.Compare)
	slices.SortFunc(b, NodePort.Compare)
	if !slices.Equal(a, b) || a[0].IP.IsValid() {
		t.Errorf("sorted: %v and %v", a, b)
	}
}

// TestFlowsAreSyncable: every set validates and has one flow per table, priority and match
// (Sync rejects duplicates); the host's part is the same with and without the patch port,
// except the one rule that also copies to the patch port.
func TestFlowsAreSyncable(t *testing.T) {
	sets := map[string][]openflow.Flow{
		"host only": Flows(params(0)),
		"with GR":   Flows(params(patchPort, NodePort{Protocol: openflow.IPProtoTCP, Port: 30080}, NodePort{Protocol: openflow.IPProtoUDP, Port: 30080})),
		"stt":       Flows(Params{Ports: Ports{Uplink: 1, Patch: 2}, MAC: nodeMAC, IP: nodeIP, Tunnel: TunnelFor("stt")}),
		"no tunnel": Flows(Params{Ports: Ports{Uplink: 1, Patch: 2}, MAC: nodeMAC, IP: nodeIP}),
	}
	for name, flows := range sets {
		keys := map[string]bool{}
		for i := range flows {
			f := &flows[i]
			if err := f.Validate(); err != nil {
				t.Errorf("%s: %s: %v", name, f, err)
			}
			k := strings.Split(f.String(), " actions=")[0]
			if keys[k] {
				t.Errorf("%s: two flows %s", name, k)
			}
			keys[k] = true
		}
	}
	patchRE := func(f openflow.Flow) bool {
		s := f.String()
		return strings.Contains(s, "in_port=2") || strings.Contains(s, "output:2")
	}
	var withGR, hostOnly []string
	for _, f := range Flows(params(patchPort)) {
		if !patchRE(f) {
			withGR = append(withGR, f.String())
		}
	}
	for _, f := range Flows(params(0)) {
		if patchRE(f) {
			t.Errorf("host only: %s mentions port 2", f.String())
		}
		if s := f.String(); s != "table=0,priority=10,in_port=1,dl_dst=0a:58:ac:12:00:01 actions=LOCAL" {
			hostOnly = append(hostOnly, s)
		}
	}
	slices.Sort(withGR)
	slices.Sort(hostOnly)
	if !slices.Equal(withGR, hostOnly) {
		t.Errorf("the host's part differs:\nwith the GR:\n  %s\nwithout:\n  %s", strings.Join(withGR, "\n  "), strings.Join(hostOnly, "\n  "))
	}
	stt := strings.Join(flowStrings(sets["stt"]), "\n")
	if !strings.Contains(stt, "priority=205,in_port=1,dl_dst=0a:58:ac:12:00:01,tcp,tp_dst=7471 actions=LOCAL") || strings.Contains(stt, "6081") {
		t.Errorf("STT rules:\n%s", stt)
	}
	if s := strings.Join(flowStrings(sets["no tunnel"]), "\n"); strings.Contains(s, "priority=20") {
		t.Errorf("tunnel rules without a tunnel:\n%s", s)
	}
}

func flowStrings(flows []openflow.Flow) []string {
	out := make([]string, len(flows))
	for i := range flows {
		out[i] = flows[i].String()
	}
	return out
}

// TestFlowsHostPort: with the host's interface a named port of the bridge (Ports.Host; the
// host vNIC on Windows) every rule is the one with LOCAL, with that port wherever LOCAL
// was (matched in_port or output), and nothing else differs; Host 0 is LOCAL.
func TestFlowsHostPort(t *testing.T) {
	nps := []NodePort{{Protocol: openflow.IPProtoTCP, Port: 30080}, {Protocol: openflow.IPProtoTCP, Port: 80, IP: netip.MustParseAddr("192.0.2.10")}}
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"host only", params(0)},
		{"with the GR", params(patchPort)},
		{"node ports", params(patchPort, nps...)},
		{"stt", Params{Ports: Ports{Uplink: upPort, Patch: patchPort}, MAC: nodeMAC, IP: nodeIP, Tunnel: TunnelFor("stt")}},
		{"no tunnel", Params{Ports: Ports{Uplink: upPort, Patch: patchPort}, MAC: nodeMAC, IP: nodeIP}},
	} {
		local := tc.p
		local.Host = openflow.PortLocal
		if got, want := flowStrings(Flows(tc.p)), flowStrings(Flows(local)); !slices.Equal(got, want) {
			t.Errorf("%s: Host 0 differs from LOCAL:\n  %s\nwant\n  %s", tc.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		named := tc.p
		named.Host = hostPort
		// want: the LOCAL rules with every use of LOCAL replaced by the host port.
		var want []openflow.Flow
		uses := 0
		for _, f := range Flows(local) {
			if f.Match.InPort == openflow.PortLocal {
				f.Match.InPort = hostPort
				uses++
			}
			as := slices.Clone(f.Actions)
			for i, a := range as {
				if o, ok := a.(openflow.Output); ok && o.Port == openflow.PortLocal {
					as[i] = openflow.Output{Port: hostPort}
					uses++
				}
			}
			f.Actions = as
			want = append(want, f)
		}
		if uses == 0 {
			t.Fatalf("%s: the LOCAL rules never use LOCAL", tc.name)
		}
		got := flowStrings(Flows(named))
		if !slices.Equal(got, flowStrings(want)) {
			t.Errorf("%s: with host port %d:\n  %s\nwant\n  %s", tc.name, hostPort, strings.Join(got, "\n  "), strings.Join(flowStrings(want), "\n  "))
		}
		for _, s := range got {
			if strings.Contains(s, "LOCAL") {
				t.Errorf("%s: with host port %d, a rule still uses LOCAL: %s", tc.name, hostPort, s)
			}
		}
		for _, f := range Flows(named) {
			if err := f.Validate(); err != nil {
				t.Errorf("%s: %s: %v", tc.name, f.String(), err)
			}
		}
	}
}
