package openflow

import (
	"net"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/test/recipe"
)

// The br-phy ("breth0") rules of the recipe test/recipe/ovn-gateway.sh (brphy_flows), twice:
// as the recipe's ovs-ofctl text, and ported to Flow values. Tests check that both say the same.

// brphyText is the recipe's rule text (test/recipe) for the same ports and addresses.
func brphyText(phys, patch uint32, mac net.HardwareAddr, ip netip.Addr) []string {
	return recipe.BrPhy(int(phys), int(patch), mac.String(), ip, recipe.NodePorts)
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
	for _, p := range recipe.NodePorts {
		proto := map[string]uint8{"tcp": IPProtoTCP, "udp": IPProtoUDP}[p.Proto]
		flows = append(flows,
			Flow{Priority: 110, Match: Match{InPort: phys, EthDst: mac, EthType: EthTypeIPv4, IPProto: proto, IPv4Dst: host, TPDst: p.Port},
				Actions: []Action{Output{patch}}},
			Flow{Priority: 110, Match: Match{InPort: patch, EthSrc: mac, EthType: EthTypeIPv4, IPProto: proto, IPv4Src: host, TPSrc: p.Port},
				Actions: []Action{Output{phys}}})
	}
	return flows
}
