// Package recipe holds, as text, the OpenFlow rules that the shell recipe ovn-gateway.sh (in
// this directory) proved on this datapath: the oracle that tests compare our bridges with,
// kept in one place so a change to the recipe is made once. brphy_test.go checks that this
// text and the recipe's brphy_flows still say the same.
package recipe

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
)

// NodePort is one entry of the recipe's NODEPORTS ("tcp:30080").
type NodePort struct {
	Proto string // "tcp" or "udp"
	Port  uint16
}

// NodePorts is the recipe's NODEPORTS.
var NodePorts = []NodePort{{"tcp", 30080}, {"tcp", 30081}, {"tcp", 30082}, {"tcp", 30083}, {"udp", 30090}, {"udp", 30091}}

// BrPhy is brphy_flows' here-document and NodePort loop with the variables filled in: the
// underlay port phys, the localnet patch port patch, the node's shared MAC and IP.
func BrPhy(phys, patch int, mac string, ip netip.Addr, nodePorts []NodePort) []string {
	s := func(format string, args ...any) string { return fmt.Sprintf(format, args...) }
	lines := []string{
		s("priority=205,in_port=%d,dl_dst=%s,udp,tp_dst=6081,actions=LOCAL", phys, mac),
		s("priority=200,in_port=%d,udp,tp_dst=6081,actions=NORMAL", phys),
		s("priority=200,in_port=LOCAL,udp,tp_dst=6081,actions=output:%d", phys),
		s("priority=100,in_port=%d,dl_src=%s,ip,actions=ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:%d", patch, mac, phys),
		s("priority=100,in_port=LOCAL,ip,actions=ct(commit,zone=64000,exec(set_field:0x2->ct_mark)),output:%d", phys),
		s("priority=50,in_port=%d,ip,actions=ct(zone=64000,table=1)", phys),
		s("priority=10,in_port=%d,dl_dst=%s,actions=output:%d,LOCAL", phys, mac, patch),
		s("priority=10,in_port=%d,dl_src=%s,actions=NORMAL", patch, mac),
		s("priority=9,in_port=%d,actions=drop", patch),
		"priority=0,actions=NORMAL",
		s("table=1,priority=100,ip,ct_state=+trk+est,ct_mark=0x1,actions=output:%d", patch),
		s("table=1,priority=100,ip,ct_state=+trk+rel,ct_mark=0x1,actions=output:%d", patch),
		"table=1,priority=100,ip,ct_state=+trk+est,ct_mark=0x2,actions=LOCAL",
		"table=1,priority=100,ip,ct_state=+trk+rel,ct_mark=0x2,actions=LOCAL",
		s("table=1,priority=10,dl_dst=%s,actions=LOCAL", mac),
		"table=1,priority=0,actions=NORMAL",
	}
	for _, p := range nodePorts {
		lines = append(lines,
			s("priority=110,in_port=%d,dl_dst=%s,%s,nw_dst=%s,tp_dst=%d,actions=output:%d", phys, mac, p.Proto, ip, p.Port, patch),
			s("priority=110,in_port=%d,dl_src=%s,%s,nw_src=%s,tp_src=%d,actions=output:%d", patch, mac, p.Proto, ip, p.Port, phys))
	}
	return lines
}

var cookieRE = regexp.MustCompile(`^cookie=0x[0-9a-f]+, `)

// StripCookies drops the cookie field ovs-ofctl prints for non-zero cookies and sorts, so a
// bridge's dump compares with the recipe's rules loaded onto a reference bridge.
func StripCookies(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = cookieRE.ReplaceAllString(l, "")
	}
	slices.Sort(out)
	return out
}
