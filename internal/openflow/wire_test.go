package openflow

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// hx decodes hex written with spaces and line breaks for readability.
func hx(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad test hex: %v", err)
	}
	return b
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// The expected bytes below were written by hand from the OpenFlow 1.3/1.4 specs and OVS's
// nicira-ext.h structure layouts, field by field, as the comments show.
func TestEncodeHandChecked(t *testing.T) {
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctFlow := Flow{Table: 0, Priority: 100, Cookie: 0xa,
		Match: Match{InPort: PortLocal, EthType: EthTypeIPv4},
		Actions: []Action{
			CT{Commit: true, Zone: 64000, Exec: []Action{SetCTMark{2}}},
			Output{1},
		}}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{{
		name: "hello 1.4 with bitmap 1.3+1.4",
		got:  helloMsg(OpenFlow14, 1<<4|1<<5),
		want: `05 00 0010 00000001
		       0001 0008 00000030`, // OFPHET_VERSIONBITMAP, length 8, bits 4 and 5
	}, {
		name: "flow-mod add priority=0 actions=NORMAL",
		got: must(appendFlowMod(nil, OpenFlow13, 2, fmAdd, &Flow{Cookie: 1,
			Actions: []Action{Output{PortNormal}}})),
		want: `04 0e 0050 00000002
		       0000000000000001 0000000000000000  cookie, cookie_mask
		       00 00 0000 0000 0000               table, ADD, idle, hard, priority
		       ffffffff ffffffff ffffffff         buffer_id, out_port, out_group
		       0000 0000                          flags, pad
		       0001 0004 00000000                 empty OXM match, padded
		       0004 0018 00000000                 APPLY_ACTIONS, 24 bytes
		       0000 0010 fffffffa 0000 000000000000  output:NORMAL max_len 0`,
	}, {
		name: "flow-mod delete_strict keeps the cookie as a filter, no instructions",
		got: must(appendFlowMod(nil, OpenFlow14, 3, fmDeleteStrict, &Flow{Table: 1, Priority: 10, Cookie: 0xa,
			Match: Match{EthDst: mac("0a:58:ac:12:00:01")}, Actions: []Action{Output{PortLocal}}})),
		want: `05 0e 0040 00000003
		       000000000000000a ffffffffffffffff
		       01 04 0000 0000 000a
		       ffffffff ffffffff ffffffff 0000 0000
		       0001 000e 80000606 0a58ac120001 0000   eth_dst, match length 14, 2 pad`,
	}, {
		name: "ct commit zone 64000 exec(set ct_mark 2), output:1",
		got:  must(appendFlowMod(nil, OpenFlow13, 4, fmAdd, &ctFlow)),
		want: `04 0e 0088 00000004
		       000000000000000a 0000000000000000
		       00 00 0000 0000 0064
		       ffffffff ffffffff ffffffff 0000 0000
		       0001 0012 80000004 fffffffe 80000a02 0800 000000000000  in_port=LOCAL, ip
		       0004 0040 00000000
		       ffff 0028 00002320 0023           NXAST_CT, 40 bytes
		       0001 00000000 fa00 ff 000000 0000 commit, zone_src 0, zone 64000, no recirc, alg 0
		       0019 0010 0001d604 00000002 00000000  set_field NXM_NX_CT_MARK
		       0000 0010 00000001 0000 000000000000`,
	}, {
		name: "ct_state masked, ct_mark exact, goto_table",
		got: appendMatch(nil, &Match{EthType: EthTypeIPv4, CTState: CTTrk | CTEst, CTStateMask: CTTrk | CTEst,
			CTMark: 1, CTMarkMask: 0xffffffff, CTZone: 7, CTZoneMask: 0xffff}),
		want: `0001 0024
		       80000a02 0800
		       0001d308 00000022 00000022   NXM_NX_CT_STATE_W
		       0001d402 0007                NXM_NX_CT_ZONE
		       0001d604 00000001            NXM_NX_CT_MARK
		       00000000`,
	}, {
		name: "tcp ports and masked IPv4",
		got: appendMatch(nil, &Match{EthType: EthTypeIPv4, IPProto: IPProtoTCP,
			IPv4Src: netip.MustParsePrefix("10.1.2.3/16"), IPv4Dst: netip.MustParsePrefix("172.18.0.1/32"),
			TPSrc: 1, TPDst: 30080}),
		want: `0001 002f
		       80000a02 0800  80001401 06
		       80001708 0a010000 ffff0000   IPV4_SRC_W, host bits cleared
		       80001804 ac120001
		       80001a02 0001  80001c02 7580 00`,
	}, {
		name: "udp and sctp ports use their own OXM fields",
		got: appendMatch(appendMatch(nil, &Match{EthType: EthTypeIPv4, IPProto: IPProtoUDP, TPDst: 6081}),
			&Match{EthType: EthTypeIPv4, IPProto: IPProtoSCTP, TPSrc: 9}),
		want: `0001 0015 80000a02 0800 80001401 11 80002002 17c1 000000
		       0001 0015 80000a02 0800 80001401 84 80002202 0009 000000`,
	}, {
		name: "ct(table=1,zone=64000), ct(nat), resubmit(,3), set eth_dst",
		got: appendInstructions(nil, &Flow{Actions: []Action{
			CT{Zone: 64000, Recirc: true, Table: 1},
			CT{Zone: 0, NAT: &NAT{}},
			Resubmit{3},
			SetEthDst{mac("aa:bb:cc:dd:ee:ff")},
		}, GotoTable: 5}),
		want: `0004 0068 00000000
		       ffff 0018 00002320 0023 0000 00000000 fa00 01 000000 0000
		       ffff 0028 00002320 0023 0000 00000000 0000 ff 000000 0000
		         ffff 0010 00002320 0024 0000 0000 0000   NXAST_NAT, no flags, no range
		       ffff 0010 00002320 000e fff8 03 000000    resubmit in_port=IN_PORT(16-bit) table 3
		       0019 0010 80000606 aabbccddeeff 0000
		       0001 0008 05 000000                       goto_table:5`,
	}, {
		name: "nat(src=1.2.3.4-1.2.3.5:100-200)",
		got:  (&NAT{Kind: NATSrc, IPMin: netip.MustParseAddr("1.2.3.4"), IPMax: netip.MustParseAddr("1.2.3.5"), PortMin: 100, PortMax: 200}).appendTo(nil),
		want: `ffff 0020 00002320 0024 0000 0001 0033   flags SRC, range IPV4_MIN|MAX|PROTO_MIN|MAX
		       01020304 01020305 0064 00c8 00000000`,
	}, {
		name: "flow stats request, cookie filter",
		got:  must(appendFlowStatsRequest(nil, OpenFlow14, 9, 0xa)),
		want: `05 12 0038 00000009
		       0001 0000 00000000             OFPMP_FLOW
		       ff 000000 ffffffff ffffffff 00000000
		       000000000000000a ffffffffffffffff
		       0001 0004 00000000`,
	}, {
		name: "bundle open",
		got:  must(appendBundleControl(nil, OpenFlow14, 7, 3, bundleOpenReq)),
		want: `05 21 0010 00000007 00000003 0000 0003`,
	}, {
		name: "bundle add wraps a flow-mod with the same xid",
		got: must(appendBundleAdd(nil, OpenFlow14, 8, 3, flowMod{fmAdd, Flow{Cookie: 1,
			Actions: []Action{Output{PortNormal}}}})),
		want: `05 22 0060 00000008 00000003 0000 0003
		       05 0e 0050 00000008
		       0000000000000001 0000000000000000 00 00 0000 0000 0000
		       ffffffff ffffffff ffffffff 0000 0000
		       0001 0004 00000000
		       0004 0018 00000000 0000 0010 fffffffa 0000 000000000000`,
	}} {
		if want := hx(t, stripComments(tc.want)); !bytes.Equal(tc.got, want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.name, tc.got, want)
		}
	}
}

// stripComments drops the words of a hex block that are not hex, so the expectations above
// can carry field names.
func stripComments(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		for _, w := range strings.Fields(line) {
			if _, err := hex.DecodeString(w); err != nil || len(w)%2 != 0 {
				break // the rest of the line is a comment
			}
			keep = append(keep, w)
		}
	}
	return strings.Join(keep, " ")
}

func TestParseError(t *testing.T) {
	e, err := parseError(hx(t, `0003 0002 0102`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.Error(), "OFPET_BAD_INSTRUCTION/OFPBIC_BAD_TABLE_ID (3/2)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e, _ = parseError(hx(t, `ffff 0010 00002320 04`))
	if e.Experimenter != nxVendorID || e.Code != 16 || len(e.Data) != 1 {
		t.Errorf("experimenter error parsed as %+v", e)
	}
}

func TestNegotiate(t *testing.T) {
	ours := uint32(1<<4 | 1<<5)
	for _, tc := range []struct {
		peerVersion uint8
		peerBitmap  uint32
		want        Version
	}{
		{0x06, 0, OpenFlow14},           // OVS 3.1 default: HELLO 1.5 without a bitmap
		{0x06, 0x7e, OpenFlow14},        // bitmap 1.0-1.5
		{0x04, 1 << 4, OpenFlow13},      // protocols=OpenFlow13
		{0x05, 1<<1 | 1<<5, OpenFlow14}, // protocols=OpenFlow10,OpenFlow14
		{0x04, 0, OpenFlow13},           // an old switch without bitmaps
		{0x01, 1 << 1, 0},               // protocols=OpenFlow10
		{0x03, 0, 0},
	} {
		got, err := negotiate(ours, tc.peerVersion, tc.peerBitmap)
		if got != tc.want || (err != nil) != (tc.want == 0) {
			t.Errorf("negotiate(peer 0x%02x, bitmap 0x%x) = %v, %v; want %v", tc.peerVersion, tc.peerBitmap, got, err, tc.want)
		}
	}
	if got := helloBitmap(hx(t, `0001 0008 00000012`)); got != 0x12 {
		t.Errorf("helloBitmap = 0x%x", got)
	}
}

func TestPipeName(t *testing.T) {
	got := pipeName("C:/openvswitch/var/run/openvswitch/br-int.mgmt")
	if want := `\\.\pipe\C:openvswitchvarrunopenvswitchbr-int.mgmt`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, bad := range []string{"", "br-int.mgmt", "ssl:1.2.3.4:6653", "unix:"} {
		if _, err := New(bad, Options{}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}
