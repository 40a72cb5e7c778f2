package conformance

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ct-zone-list and br-int's external_ids as ovn-controller 23.03 and ovs-vsctl 3.1 print
// them.
const (
	zoneListOut = `x_a 19
3b6c1959-f9c5-4745-a565-bd3a27fec603_snat 3
x_c 20
rtoe-GR_node1 1
y_b 21
`
	bridgeIDsOut = `{ct-zone-3b6c1959-f9c5-4745-a565-bd3a27fec603_snat="3", ct-zone-rtoe-GR_node1="1", ct-zone-x_a="19", ct-zone-x_c="20", ct-zone-y_b="21", ovn-nb-cfg="12", ovn-startup-ts="1795732061000"}
`
)

func TestParseZones(t *testing.T) {
	want := zoneMap{"x_a": 19, "3b6c1959-f9c5-4745-a565-bd3a27fec603_snat": 3, "x_c": 20, "rtoe-GR_node1": 1, "y_b": 21}
	if got := parseZoneList(zoneListOut); !maps.Equal(got, want) {
		t.Errorf("parseZoneList = %v, want %v", got, want)
	}
	if got := parseBridgeZones(bridgeIDsOut); !maps.Equal(got, want) {
		t.Errorf("parseBridgeZones = %v, want %v", got, want)
	}
}

func TestSharedZonesAndDisagreements(t *testing.T) {
	ctl := zoneMap{"x_a": 19, "x_c": 20, "y_b": 20, "z_a": 22}
	if got, want := sharedZones(ctl), []string{"zone 20: x_c, y_b"}; !slices.Equal(got, want) {
		t.Errorf("sharedZones = %q, want %q", got, want)
	}
	if got := sharedZones(zoneMap{"x_a": 19, "x_c": 20}); len(got) != 0 {
		t.Errorf("sharedZones of distinct zones = %q", got)
	}
	db := zoneMap{"x_a": 19, "x_c": 21, "y_b": 20, "gone": 5}
	want := []string{
		"gone: br-int's external_ids zone 5, unknown to ovn-controller",
		"x_c: ovn-controller zone 20, br-int's external_ids zone 21",
		"z_a: ovn-controller zone 22, not in br-int's external_ids",
	}
	if got := zoneDisagreements(ctl, db); !slices.Equal(got, want) {
		t.Errorf("zoneDisagreements = %q, want %q", got, want)
	}
}

func TestDatapathActions(t *testing.T) {
	trace := `Flow: tcp,in_port=5
bridge("br-int")
 0. in_port=5, priority 100
Final flow: unchanged
Megaflow: recirc_id=0,eth,tcp,in_port=5
Datapath actions: ct(zone=20,nat),recirc(0x5)

===============================================================================
recirc(0x5) - resume conntrack with ct_state=new|trk
===============================================================================
Megaflow: recirc_id=0x5,ct_state=+new-est-rel-rpl-inv+trk
Datapath actions: drop
`
	if got, want := datapathActions(trace), []string{"ct(zone=20,nat),recirc(0x5)", "drop"}; !slices.Equal(got, want) {
		t.Errorf("datapathActions = %q, want %q", got, want)
	}
}

func TestPairFlows(t *testing.T) {
	a, b := netip.MustParseAddr("10.244.0.4"), netip.MustParseAddr("10.244.0.3")
	dump := `ufid:1, recirc_id(0),dp_hash(0/0),skb_priority(0/0),in_port(5),eth(src=0a:58:0a:f4:00:04,dst=0a:58:0a:f4:00:03),eth_type(0x0800),ipv4(src=10.244.0.4,dst=10.128.0.0/255.128.0.0,proto=6,frag=no), packets:3, bytes:222, used:0.5s, flags:S, actions:ct(zone=20,nat),recirc(0x5)
ufid:2, recirc_id(0x284),ct_state(+new-est-rel-rpl-inv+trk),in_port(5),eth(src=0a:58:0a:f4:00:04,dst=00:00:00:00:00:00/00:00:00:00:00:00),eth_type(0x0800),ipv4(frag=no),tcp(dst=80), packets:3, bytes:222, used:0.5s, flags:S, actions:drop
ufid:3, recirc_id(0),in_port(4),eth(src=0a:58:0a:f4:00:03,dst=0a:58:0a:f4:00:04),eth_type(0x0800),ipv4(src=10.244.0.3,dst=10.244.0.4,proto=6,frag=no), packets:1, bytes:74, used:0.5s, flags:S, actions:ct(zone=19,nat),recirc(0x6)
ufid:5, recirc_id(0),in_port(6),eth(src=0a:58:0a:f4:00:05,dst=0a:58:0a:f4:00:03),eth_type(0x0800),ipv4(src=10.244.0.5,dst=10.244.0.3,proto=6,frag=no), packets:1, bytes:74, used:0.5s, flags:S, actions:ct(zone=21,nat),recirc(0x6)
ufid:4, recirc_id(0x7),in_port(6),eth(src=0a:58:0a:f4:00:05),eth_type(0x0800),ipv4(frag=no), packets:1, bytes:74, used:0.5s, actions:drop
`
	got := pairFlows(dump, a, b)
	if len(got) != 3 || !strings.HasPrefix(got[0], "ufid:1,") || !strings.HasPrefix(got[1], "ufid:2,") || !strings.HasPrefix(got[2], "ufid:3,") {
		t.Errorf("pairFlows = %q, want ufid 1 and 3 (both pods) and 2 (a drop of one)", got)
	}
}

func TestVSwitchdWarnings(t *testing.T) {
	log := `2026-11-26T22:48:20.100Z|00130|dpif|WARN|failed to enumerate system datapaths: No such file or directory
2026-11-26T22:48:21.000Z|00131|bridge|INFO|bridge br-int: added interface ovt1
2026-11-26T22:48:28.703Z|00133|ofproto_dpif_upcall|WARN|upcall_cb failure: ukey installation fails
2026-11-26T22:48:29.100Z|00134|dpif|WARN|failed to enumerate system datapaths: No such file or directory
2026-11-26T22:48:31.714Z|00001|dpif(revalidator5)|WARN|netdev@ovs-netdev: failed to put[modify] (No such file or directory) ufid:6688cbe3
2026-11-26T22:48:32.000Z|00135|dpif_netdev|ERR|error receiving data from ovt2: Network is down
`
	path := filepath.Join(t.TempDir(), "node1-ovs-vswitchd.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := vswitchdWarnings(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], "failed to put[modify]") || !strings.Contains(got[1], "|ERR|") {
		t.Errorf("vswitchdWarnings(most 2) = %q, want the put[modify] warning and the error", got)
	}
	if all, _ := vswitchdWarnings(path, 10); len(all) != 3 {
		t.Errorf("vswitchdWarnings(most 10) = %q, want 3 lines", all)
	}
}
