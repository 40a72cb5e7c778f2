package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// The machines the tests run on have no kernel SCTP (CONFIG_IP_SCTP unset: socket() fails with
// EPROTONOSUPPORT), so neither the probe nor the workload can open an SCTP socket. Data-path
// tests only need to know that an SCTP packet reached a backend, through DNAT and load
// balancing, and that its answer found the way back: the first exchange of the association
// set-up (RFC 9260 section 5.1), INIT and INIT-ACK, shows that. Both ends build and read those
// two packets themselves on raw IPPROTO_SCTP sockets, which the kernel does support.

const (
	protoSCTP     = 132
	sctpHeaderLen = 12
	// initBodyLen is the fixed part of INIT and INIT-ACK after the chunk header: initiate tag,
	// advertised receiver window, outbound and inbound stream counts, initial TSN.
	initBodyLen    = 16
	chunkHeaderLen = 4

	chunkInit    = 1
	chunkInitAck = 2
	// paramStateCookie is mandatory in an INIT-ACK. Its value is opaque to the peer, so the
	// workload puts its answer line there: the probe learns which backend answered and which
	// client address it saw, as the TCP and UDP probes do.
	paramStateCookie = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpInit is an SCTP packet with one INIT or INIT-ACK chunk: all the probe and the workload
// exchange.
type sctpInit struct {
	SrcPort, DstPort uint16
	// VerificationTag is 0 in an INIT; in an INIT-ACK it is the INIT's InitiateTag, which is
	// how the receiver matches the answer to its INIT.
	VerificationTag uint32
	Type            uint8 // chunkInit or chunkInitAck
	InitiateTag     uint32
	InitialTSN      uint32
	Cookie          []byte // INIT-ACK only
}

// marshal returns the packet with its CRC32c checksum.
func (p sctpInit) marshal() []byte {
	var params []byte
	if p.Cookie != nil {
		params = appendParam(params, paramStateCookie, p.Cookie)
	}
	chunkLen := chunkHeaderLen + initBodyLen + len(params)
	b := make([]byte, sctpHeaderLen, sctpHeaderLen+chunkLen+3)
	binary.BigEndian.PutUint16(b[0:], p.SrcPort)
	binary.BigEndian.PutUint16(b[2:], p.DstPort)
	binary.BigEndian.PutUint32(b[4:], p.VerificationTag)
	b = append(b, p.Type, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(chunkLen))
	b = binary.BigEndian.AppendUint32(b, p.InitiateTag)
	b = binary.BigEndian.AppendUint32(b, 65535) // a_rwnd: any value >= 1500 is accepted
	// One stream each way: the minimum, and valid whatever the peer offers.
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, p.InitialTSN)
	b = append(b, params...)
	// The chunk length does not count the padding to 4 bytes, but the padding is sent.
	b = append(b, make([]byte, pad4(len(b))-len(b))...)
	setChecksum(b)
	return b
}

func appendParam(b []byte, typ uint16, value []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(value)))
	b = append(b, value...)
	return append(b, make([]byte, pad4(len(value))-len(value))...)
}

func pad4(n int) int { return (n + 3) &^ 3 }

// setChecksum writes the CRC32c of the packet into its checksum field. The checksum is
// computed with the field zeroed and stored least significant byte first (RFC 9260
// appendix A), unlike every other field of the packet.
func setChecksum(b []byte) {
	clear(b[8:12])
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, castagnoli))
}

func checksumOK(b []byte) bool {
	want := binary.LittleEndian.Uint32(b[8:])
	c := make([]byte, len(b))
	copy(c, b)
	clear(c[8:12])
	return crc32.Checksum(c, castagnoli) == want
}

var errNotInit = errors.New("not an SCTP INIT or INIT-ACK")

// parseSCTPInit reads an SCTP packet whose first chunk is an INIT or INIT-ACK; it returns
// errNotInit for other valid packets.
func parseSCTPInit(b []byte) (sctpInit, error) {
	var p sctpInit
	if len(b) < sctpHeaderLen+chunkHeaderLen {
		return p, fmt.Errorf("SCTP packet of %d bytes is too short", len(b))
	}
	if !checksumOK(b) {
		return p, errors.New("SCTP checksum mismatch")
	}
	p.SrcPort = binary.BigEndian.Uint16(b[0:])
	p.DstPort = binary.BigEndian.Uint16(b[2:])
	p.VerificationTag = binary.BigEndian.Uint32(b[4:])
	p.Type = b[12]
	if p.Type != chunkInit && p.Type != chunkInitAck {
		return p, errNotInit
	}
	chunkLen := int(binary.BigEndian.Uint16(b[14:]))
	if chunkLen < chunkHeaderLen+initBodyLen || sctpHeaderLen+chunkLen > len(b) {
		return p, fmt.Errorf("SCTP chunk length %d does not fit a packet of %d bytes", chunkLen, len(b))
	}
	body := b[sctpHeaderLen+chunkHeaderLen : sctpHeaderLen+chunkLen]
	p.InitiateTag = binary.BigEndian.Uint32(body[0:])
	p.InitialTSN = binary.BigEndian.Uint32(body[12:])
	params := body[initBodyLen:]
	for len(params) >= 4 {
		typ := binary.BigEndian.Uint16(params[0:])
		l := int(binary.BigEndian.Uint16(params[2:]))
		if l < 4 || l > len(params) {
			return p, fmt.Errorf("SCTP parameter %d has bad length %d", typ, l)
		}
		if typ == paramStateCookie {
			p.Cookie = append([]byte(nil), params[4:l]...)
		}
		params = params[min(pad4(l), len(params)):]
	}
	return p, nil
}

// ipv4Packet splits an IPv4 packet as a raw socket returns it (header included).
func ipv4Packet(b []byte) (src, dst netip.Addr, proto uint8, payload []byte, err error) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return src, dst, 0, nil, errors.New("not an IPv4 packet")
	}
	hl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if hl < 20 || total < hl || total > len(b) {
		return src, dst, 0, nil, fmt.Errorf("bad IPv4 header (length %d, total %d, have %d)", hl, total, len(b))
	}
	src = netip.AddrFrom4([4]byte(b[12:16]))
	dst = netip.AddrFrom4([4]byte(b[16:20]))
	return src, dst, b[9], b[hl:total], nil
}

// ipv4Header returns a 20-byte IPv4 header for an IP_HDRINCL raw socket; the kernel fills in
// the identification and the header checksum.
func ipv4Header(src, dst netip.Addr, proto uint8, payloadLen int) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+payloadLen))
	binary.BigEndian.PutUint16(h[6:], 0x4000) // DF, as SCTP stacks send
	h[8] = 64
	h[9] = proto
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	return h
}
