package openflow

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strings"
)

// Ethernet types and IP protocols the shorthand names in Match.String know.
const (
	EthTypeIPv4 uint16 = 0x0800
	EthTypeARP  uint16 = 0x0806
	EthTypeIPv6 uint16 = 0x86dd

	IPProtoICMP uint8 = 1
	IPProtoTCP  uint8 = 6
	IPProtoUDP  uint8 = 17
	IPProtoSCTP uint8 = 132
)

// Connection tracking state bits (Nicira NXM_NX_CT_STATE; ovs-fields(7) "ct_state").
const (
	CTNew  uint32 = 0x01
	CTEst  uint32 = 0x02
	CTRel  uint32 = 0x04
	CTRpl  uint32 = 0x08
	CTInv  uint32 = 0x10
	CTTrk  uint32 = 0x20
	CTSNAT uint32 = 0x40
	CTDNAT uint32 = 0x80
)

var ipProtoNames = map[uint8]string{IPProtoICMP: "icmp", IPProtoTCP: "tcp", IPProtoUDP: "udp", IPProtoSCTP: "sctp"}

var ctStateNames = []struct {
	bit  uint32
	name string
}{{CTNew, "new"}, {CTEst, "est"}, {CTRel, "rel"}, {CTRpl, "rpl"}, {CTInv, "inv"}, {CTTrk, "trk"}, {CTSNAT, "snat"}, {CTDNAT, "dnat"}}

// Match selects packets. A zero field matches anything, so the zero Match matches every
// packet; the exceptions are the masked fields, where a zero mask means "any".
//
// Prerequisites are not added implicitly (they would make the Match read back from the
// switch differ from the one written): IPProto and IPv4 addresses need EthType, and TPSrc
// and TPDst need IPProto TCP, UDP or SCTP.
type Match struct {
	InPort  uint32           // 0: any (OpenFlow numbers ports from 1); may be PortLocal
	EthSrc  net.HardwareAddr // nil: any; exact
	EthDst  net.HardwareAddr
	EthType uint16       // 0: any
	IPProto uint8        // 0: any
	IPv4Src netip.Prefix // the zero Prefix: any; a shorter prefix than /32 is a mask
	IPv4Dst netip.Prefix
	TPSrc   uint16 // 0: any; the TCP, UDP or SCTP port, by IPProto
	TPDst   uint16

	CTState, CTStateMask uint32 // mask 0: any; bits CTNew..CTDNAT
	CTZone, CTZoneMask   uint16 // mask 0: any, 0xffff: exact (OVS cannot mask ct_zone)
	CTMark, CTMarkMask   uint32 // mask 0: any

	// Raw, when not nil, is a whole ofp_match (padding included) read from a switch that
	// this package does not model; the fields above are then zero. It is written back
	// verbatim, which is how Sync deletes such a flow, but a desired flow cannot have one.
	Raw []byte
}

// OXM headers: class<<16 | field<<9 | hasmask<<8 | length. OpenFlow basic class 0x8000,
// fields from OpenFlow 1.3 section 7.2.3.7; the conntrack fields exist only in the Nicira
// NXM1 class 0x0001 (fields 105-107), which OVS accepts inside OXM matches.
const (
	oxmInPort  = 0x80000004
	oxmEthDst  = 0x80000606
	oxmEthSrc  = 0x80000806
	oxmEthType = 0x80000a02
	oxmIPProto = 0x80001401
	oxmIPv4Src = 0x80001604
	oxmIPv4Dst = 0x80001804
	oxmTCPSrc  = 0x80001a02
	oxmTCPDst  = 0x80001c02
	oxmUDPSrc  = 0x80001e02
	oxmUDPDst  = 0x80002002
	oxmSCTPSrc = 0x80002202
	oxmSCTPDst = 0x80002402
	nxmCTState = 0x0001d204
	nxmCTZone  = 0x0001d402
	nxmCTMark  = 0x0001d604
)

// masked turns an unmasked OXM header into its masked form (hasmask set, length doubled).
func masked(h uint32) uint32 { return h&^0x1ff | 0x100 | (h&0xff)*2 }

// tpFields are the OXM port headers (src, dst) for each transport protocol.
var tpFields = map[uint8][2]uint32{
	IPProtoTCP:  {oxmTCPSrc, oxmTCPDst},
	IPProtoUDP:  {oxmUDPSrc, oxmUDPDst},
	IPProtoSCTP: {oxmSCTPSrc, oxmSCTPDst},
}

// Validate reports a Match that cannot be encoded or that OVS would reject for a missing
// prerequisite.
func (m *Match) Validate() error {
	if m.Raw != nil {
		return errors.New("openflow: a raw match read from the switch cannot be synced")
	}
	for _, mac := range []net.HardwareAddr{m.EthSrc, m.EthDst} {
		if mac != nil && len(mac) != 6 {
			return fmt.Errorf("openflow: MAC %v is not 6 bytes", mac)
		}
	}
	if m.IPProto != 0 && m.EthType != EthTypeIPv4 && m.EthType != EthTypeIPv6 {
		return fmt.Errorf("openflow: ip_proto %d needs eth_type IPv4 or IPv6", m.IPProto)
	}
	for _, p := range []netip.Prefix{m.IPv4Src, m.IPv4Dst} {
		if p.IsValid() && (!p.Addr().Is4() || m.EthType != EthTypeIPv4) {
			return fmt.Errorf("openflow: %v needs an IPv4 prefix and eth_type IPv4", p)
		}
	}
	if (m.TPSrc != 0 || m.TPDst != 0) && tpFields[m.IPProto] == [2]uint32{} {
		return fmt.Errorf("openflow: tp_src/tp_dst need ip_proto TCP, UDP or SCTP, not %d", m.IPProto)
	}
	if m.CTState&^m.CTStateMask != 0 {
		return fmt.Errorf("openflow: ct_state 0x%x has bits outside its mask 0x%x", m.CTState, m.CTStateMask)
	}
	if m.CTMark&^m.CTMarkMask != 0 {
		return fmt.Errorf("openflow: ct_mark 0x%x has bits outside its mask 0x%x", m.CTMark, m.CTMarkMask)
	}
	if (m.CTZoneMask != 0 && m.CTZoneMask != 0xffff) || m.CTZone&^m.CTZoneMask != 0 {
		return fmt.Errorf("openflow: ct_zone %d/0x%x: the mask must be 0 or 0xffff", m.CTZone, m.CTZoneMask)
	}
	return nil
}

// appendMatch appends an OpenFlow 1.3 ofp_match (type OXM) holding m, padded to 8 bytes.
// The Match must be valid.
func appendMatch(b []byte, m *Match) []byte {
	if m.Raw != nil {
		return append(b, m.Raw...)
	}
	start := len(b)
	b = append(b, 0, 1, 0, 0) // OFPMT_OXM; length filled below
	if m.InPort != 0 {
		b = appendOXM32(b, oxmInPort, m.InPort, ^uint32(0))
	}
	if m.EthDst != nil {
		b = binary.BigEndian.AppendUint32(b, oxmEthDst)
		b = append(b, m.EthDst...)
	}
	if m.EthSrc != nil {
		b = binary.BigEndian.AppendUint32(b, oxmEthSrc)
		b = append(b, m.EthSrc...)
	}
	if m.EthType != 0 {
		b = binary.BigEndian.AppendUint32(b, oxmEthType)
		b = binary.BigEndian.AppendUint16(b, m.EthType)
	}
	if m.IPProto != 0 {
		b = binary.BigEndian.AppendUint32(b, oxmIPProto)
		b = append(b, m.IPProto)
	}
	// A /0 prefix matches anything: OVS drops it, so it is not written (nor printed).
	if m.IPv4Src.IsValid() && m.IPv4Src.Bits() > 0 {
		v, mask := prefixValue(m.IPv4Src)
		b = appendOXM32(b, oxmIPv4Src, v, mask)
	}
	if m.IPv4Dst.IsValid() && m.IPv4Dst.Bits() > 0 {
		v, mask := prefixValue(m.IPv4Dst)
		b = appendOXM32(b, oxmIPv4Dst, v, mask)
	}
	tp := tpFields[m.IPProto]
	if m.TPSrc != 0 {
		b = binary.BigEndian.AppendUint32(b, tp[0])
		b = binary.BigEndian.AppendUint16(b, m.TPSrc)
	}
	if m.TPDst != 0 {
		b = binary.BigEndian.AppendUint32(b, tp[1])
		b = binary.BigEndian.AppendUint16(b, m.TPDst)
	}
	if m.CTStateMask != 0 {
		b = appendOXM32(b, nxmCTState, m.CTState, m.CTStateMask)
	}
	if m.CTZoneMask != 0 {
		b = binary.BigEndian.AppendUint32(b, nxmCTZone)
		b = binary.BigEndian.AppendUint16(b, m.CTZone)
	}
	if m.CTMarkMask != 0 {
		b = appendOXM32(b, nxmCTMark, m.CTMark, m.CTMarkMask)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start)) // ofp_match.length excludes padding
	return pad8(b, start)
}

// appendOXM32 appends a 32-bit field, masked unless the mask is all ones: OVS writes exact
// matches unmasked, so doing the same keeps what we write equal to what we read back.
func appendOXM32(b []byte, h uint32, v, mask uint32) []byte {
	if mask == ^uint32(0) {
		b = binary.BigEndian.AppendUint32(b, h)
		return binary.BigEndian.AppendUint32(b, v)
	}
	b = binary.BigEndian.AppendUint32(b, masked(h))
	b = binary.BigEndian.AppendUint32(b, v)
	return binary.BigEndian.AppendUint32(b, mask)
}

func prefixValue(p netip.Prefix) (v, mask uint32) {
	a := p.Masked().Addr().As4()
	return binary.BigEndian.Uint32(a[:]), ^uint32(0) << (32 - p.Bits())
}

// parseMatch decodes an ofp_match at the start of b and returns it and its padded length.
// Fields this package does not model are an error: the caller keeps the raw bytes instead.
func parseMatch(b []byte) (Match, int, error) {
	var m Match
	if len(b) < 4 {
		return m, 0, fmt.Errorf("openflow: match truncated")
	}
	typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
	padded := (n + 7) / 8 * 8
	if typ != 1 || n < 4 || padded > len(b) {
		return m, 0, fmt.Errorf("openflow: bad match (type %d, length %d of %d)", typ, n, len(b))
	}
	seen := map[uint32]bool{}
	var tpSrc, tpDst uint32
	for oxm := b[4:n]; len(oxm) > 0; {
		if len(oxm) < 4 {
			return m, 0, fmt.Errorf("openflow: OXM header truncated")
		}
		h := binary.BigEndian.Uint32(oxm)
		l := int(h & 0xff)
		if len(oxm) < 4+l {
			return m, 0, fmt.Errorf("openflow: OXM 0x%08x truncated", h)
		}
		val := oxm[4 : 4+l]
		oxm = oxm[4+l:]
		hasMask := h&0x100 != 0
		base := h &^ 0x1ff
		if seen[base] {
			return m, 0, fmt.Errorf("openflow: OXM 0x%08x repeated", h)
		}
		seen[base] = true
		var err error
		switch {
		case h == oxmInPort:
			m.InPort = binary.BigEndian.Uint32(val)
		case h == oxmEthDst:
			m.EthDst = net.HardwareAddr(bytes.Clone(val))
		case h == oxmEthSrc:
			m.EthSrc = net.HardwareAddr(bytes.Clone(val))
		case h == oxmEthType:
			m.EthType = binary.BigEndian.Uint16(val)
		case h == oxmIPProto:
			m.IPProto = val[0]
		case base == oxmIPv4Src&^0x1ff:
			m.IPv4Src, err = parsePrefix(val, hasMask)
		case base == oxmIPv4Dst&^0x1ff:
			m.IPv4Dst, err = parsePrefix(val, hasMask)
		case h == oxmTCPSrc || h == oxmUDPSrc || h == oxmSCTPSrc:
			m.TPSrc, tpSrc = binary.BigEndian.Uint16(val), h
		case h == oxmTCPDst || h == oxmUDPDst || h == oxmSCTPDst:
			m.TPDst, tpDst = binary.BigEndian.Uint16(val), h
		case base == nxmCTState&^0x1ff:
			m.CTState, m.CTStateMask, err = parse32(val, hasMask)
		case h == nxmCTZone:
			m.CTZone, m.CTZoneMask = binary.BigEndian.Uint16(val), 0xffff
		case base == nxmCTMark&^0x1ff:
			m.CTMark, m.CTMarkMask, err = parse32(val, hasMask)
		default:
			err = fmt.Errorf("openflow: OXM field 0x%08x not supported", h)
		}
		if err != nil {
			return m, 0, err
		}
	}
	// A port field must belong to the protocol the match names, or encoding m again would
	// produce a different field.
	tp := tpFields[m.IPProto]
	if (tpSrc != 0 && tpSrc != tp[0]) || (tpDst != 0 && tpDst != tp[1]) {
		return m, 0, fmt.Errorf("openflow: transport port field does not fit ip_proto %d", m.IPProto)
	}
	return m, padded, nil
}

func parse32(val []byte, hasMask bool) (v, mask uint32, err error) {
	if len(val) != 4 && len(val) != 8 {
		return 0, 0, fmt.Errorf("openflow: 32-bit OXM with %d bytes", len(val))
	}
	if !hasMask {
		return binary.BigEndian.Uint32(val), ^uint32(0), nil
	}
	return binary.BigEndian.Uint32(val), binary.BigEndian.Uint32(val[4:]), nil
}

func parsePrefix(val []byte, hasMask bool) (netip.Prefix, error) {
	v, mask, err := parse32(val, hasMask)
	if err != nil {
		return netip.Prefix{}, err
	}
	ones := bits.LeadingZeros32(^mask)
	if mask != ^uint32(0)<<(32-ones) { // a shift by 32 gives 0: mask 0 is /0
		return netip.Prefix{}, fmt.Errorf("openflow: IPv4 mask 0x%08x is not a prefix", mask)
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], v)
	return netip.PrefixFrom(netip.AddrFrom4(a), ones), nil
}

// String renders the match in ovs-ofctl's syntax, fields in a fixed order. Sync uses it as
// the flow's identity, so equal matches give equal strings.
func (m *Match) String() string {
	if m.Raw != nil {
		return "raw_match=" + hex.EncodeToString(m.Raw)
	}
	var f []string
	add := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
	if m.InPort != 0 {
		add("in_port=%s", portName(m.InPort))
	}
	if m.EthSrc != nil {
		add("dl_src=%s", m.EthSrc)
	}
	if m.EthDst != nil {
		add("dl_dst=%s", m.EthDst)
	}
	switch name := ipProtoNames[m.IPProto]; {
	case m.EthType == EthTypeIPv4 && name != "":
		add("%s", name)
	case m.EthType == EthTypeIPv4:
		add("ip")
	case m.EthType == EthTypeARP:
		add("arp")
	case m.EthType != 0:
		add("dl_type=0x%04x", m.EthType)
	}
	if m.IPProto != 0 && (m.EthType != EthTypeIPv4 || ipProtoNames[m.IPProto] == "") {
		add("nw_proto=%d", m.IPProto)
	}
	for _, x := range []struct {
		name string
		p    netip.Prefix
	}{{"nw_src", m.IPv4Src}, {"nw_dst", m.IPv4Dst}} {
		if x.p.IsValid() && x.p.Bits() > 0 {
			if p := x.p.Masked(); p.Bits() == 32 {
				add("%s=%s", x.name, p.Addr())
			} else {
				add("%s=%s", x.name, p)
			}
		}
	}
	if m.TPSrc != 0 {
		add("tp_src=%d", m.TPSrc)
	}
	if m.TPDst != 0 {
		add("tp_dst=%d", m.TPDst)
	}
	if m.CTStateMask != 0 {
		add("ct_state=%s", ctStateString(m.CTState, m.CTStateMask))
	}
	if m.CTZoneMask != 0 {
		add("ct_zone=%d", m.CTZone)
	}
	if m.CTMarkMask != 0 {
		add("ct_mark=%s", maskedHex(m.CTMark, m.CTMarkMask))
	}
	return strings.Join(f, ",")
}

// ctStateString prints "+trk+est"-style flags, as ovs-ofctl does, in bit order; bits of the
// mask outside the known flags fall back to hex.
func ctStateString(v, mask uint32) string {
	var s strings.Builder
	known := uint32(0)
	for _, n := range ctStateNames {
		known |= n.bit
		if mask&n.bit != 0 {
			if v&n.bit != 0 {
				s.WriteByte('+')
			} else {
				s.WriteByte('-')
			}
			s.WriteString(n.name)
		}
	}
	if mask&^known != 0 {
		return maskedHex(v, mask)
	}
	return s.String()
}

func maskedHex(v, mask uint32) string {
	if mask == ^uint32(0) {
		return fmt.Sprintf("0x%x", v)
	}
	return fmt.Sprintf("0x%x/0x%x", v, mask)
}

// portName prints reserved ports by name, as ovs-ofctl does.
func portName(p uint32) string {
	switch p {
	case PortLocal:
		return "LOCAL"
	case PortNormal:
		return "NORMAL"
	case PortInPort:
		return "IN_PORT"
	case PortController:
		return "CONTROLLER"
	case portAny:
		return "ANY"
	}
	return fmt.Sprint(p)
}
