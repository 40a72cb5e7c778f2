package openflow

import (
	"fmt"
	"net"
	"net/netip"
)

// The br-phy ("breth0") rules of shared/recipes/ovn-gateway.sh brphy_flows, twice: as the
// recipe's ovs-ofctl text, and ported to Flow values. Tests check that both say the same.

type nodePort struct {
	proto uint8
	port  uint16
}

// recipeNodePorts is the recipe's NODEPORTS.
var recipeNodePorts = []nodePort{{IPProtoTCP, 30080}, {IPProtoTCP, 30081}, {IPProtoTCP, 30082},
	{IPProtoTCP, 30083}, {IPProtoUDP, 30090}, {IPProtoUDP, 30091}}

// brphyText is brphy_flows' here-document and NodePort loop with the variables filled in.
func brphyText(phys, patch uint32, mac net.HardwareAddr, ip netip.Addr) []string {
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
	for _, p := range recipeNodePorts {
		proto := ipProtoNames[p.proto]
		lines = append(lines,
			s("priority=110,in_port=%d,dl_dst=%s,%s,nw_dst=%s,tp_dst=%d,actions=output:%d", phys, mac, proto, ip, p.port, patch),
			s("priority=110,in_port=%d,dl_src=%s,%s,nw_src=%s,tp_src=%d,actions=output:%d", patch, mac, proto, ip, p.port, phys))
	}
	return lines
}

// brphyFlows is the same rule set as Flow values, in the same order as brphyText.
func brphyFlows(phys, patch uint32, mac net.HardwareAddr, ip netip.Addr) []Flow {
	const zone = 64000
	geneve := func(m Match) Match { m.EthType, m.IPProto, m.TPDst = EthTypeIPv4, IPProtoUDP, 6081; return m }
	commit := func(mark uint32) Action { return CT{Commit: true, Zone: zone, Exec: []Action{SetCTMark{mark}}} }
	ctBack := func(state, mark uint32) Match {
		return Match{EthType: EthTypeIPv4, CTState: state, CTStateMask: state, CTMark: mark, CTMarkMask: ^uint32(0)}
	}
	flows := []Flow{
		{Priority: 205, Match: geneve(Match{InPort: phys, EthDst: mac}), Actions: []Action{Output{PortLocal}}},
		{Priority: 200, Match: geneve(Match{InPort: phys}), Actions: []Action{Output{PortNormal}}},
		{Priority: 200, Match: geneve(Match{InPort: PortLocal}), Actions: []Action{Output{phys}}},
		{Priority: 100, Match: Match{InPort: patch, EthSrc: mac, EthType: EthTypeIPv4}, Actions: []Action{commit(1), Output{phys}}},
		{Priority: 100, Match: Match{InPort: PortLocal, EthType: EthTypeIPv4}, Actions: []Action{commit(2), Output{phys}}},
		{Priority: 50, Match: Match{InPort: phys, EthType: EthTypeIPv4}, Actions: []Action{CT{Zone: zone, Recirc: true, Table: 1}}},
		{Priority: 10, Match: Match{InPort: phys, EthDst: mac}, Actions: []Action{Output{patch}, Output{PortLocal}}},
		{Priority: 10, Match: Match{InPort: patch, EthSrc: mac}, Actions: []Action{Output{PortNormal}}},
		{Priority: 9, Match: Match{InPort: patch}}, // drop
		{Priority: 0, Actions: []Action{Output{PortNormal}}},
		{Table: 1, Priority: 100, Match: ctBack(CTTrk|CTEst, 1), Actions: []Action{Output{patch}}},
		{Table: 1, Priority: 100, Match: ctBack(CTTrk|CTRel, 1), Actions: []Action{Output{patch}}},
		{Table: 1, Priority: 100, Match: ctBack(CTTrk|CTEst, 2), Actions: []Action{Output{PortLocal}}},
		{Table: 1, Priority: 100, Match: ctBack(CTTrk|CTRel, 2), Actions: []Action{Output{PortLocal}}},
		{Table: 1, Priority: 10, Match: Match{EthDst: mac}, Actions: []Action{Output{PortLocal}}},
		{Table: 1, Priority: 0, Actions: []Action{Output{PortNormal}}},
	}
	host := netip.PrefixFrom(ip, 32)
	for _, p := range recipeNodePorts {
		flows = append(flows,
			Flow{Priority: 110, Match: Match{InPort: phys, EthDst: mac, EthType: EthTypeIPv4, IPProto: p.proto, IPv4Dst: host, TPDst: p.port},
				Actions: []Action{Output{patch}}},
			Flow{Priority: 110, Match: Match{InPort: patch, EthSrc: mac, EthType: EthTypeIPv4, IPProto: p.proto, IPv4Src: host, TPSrc: p.port},
				Actions: []Action{Output{phys}}})
	}
	return flows
}
