package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is an OpenFlow wire protocol version (the header's first byte).
type Version uint8

// The versions this package speaks. OpenFlow 1.3 and 1.4 share the flow-mod and flow-stats
// layouts (1.4 only names a pad field "importance"); 1.4 adds bundles, which make Sync
// atomic. OpenFlow 1.5 is not offered: it changes the flow-stats reply (OXS statistics).
const (
	OpenFlow13 Version = 0x04
	OpenFlow14 Version = 0x05
)

func (v Version) String() string {
	switch v {
	case OpenFlow13:
		return "OpenFlow13"
	case OpenFlow14:
		return "OpenFlow14"
	}
	return fmt.Sprintf("OpenFlow(0x%02x)", uint8(v))
}

// Message types (OpenFlow 1.3 numbering, unchanged in 1.4).
const (
	typeHello          = 0
	typeError          = 1
	typeEchoRequest    = 2
	typeEchoReply      = 3
	typeFlowMod        = 14
	typeMultipartReq   = 18
	typeMultipartReply = 19
	typeBarrierReq     = 20
	typeBarrierReply   = 21
	typeBundleControl  = 33 // OpenFlow 1.4
	typeBundleAdd      = 34 // OpenFlow 1.4
)

const (
	headerLen    = 8
	maxMsgLen    = 0xffff
	nxVendorID   = 0x00002320 // Nicira, OVS's extension experimenter ID
	noBuffer     = 0xffffffff
	groupAny     = 0xffffffff
	tableAll     = 0xff
	ctRecircNone = 0xff // NX_CT_RECIRC_NONE: ct without table=
)

// Reserved port numbers (OpenFlow 1.1+ 32-bit space).
const (
	PortMax        uint32 = 0xffffff00 // highest number of a real port
	PortInPort     uint32 = 0xfffffff8
	PortNormal     uint32 = 0xfffffffa
	PortController uint32 = 0xfffffffd
	PortLocal      uint32 = 0xfffffffe
	portAny        uint32 = 0xffffffff
)

// Flow-mod commands.
const (
	fmAdd          = 0
	fmDeleteStrict = 4
)

// Multipart (statistics) types and flags.
const (
	mpFlow      = 1
	mpReplyMore = 1
)

// Bundle control types and flags (OpenFlow 1.4 section 7.3.9).
const (
	bundleOpenReq      = 0
	bundleOpenReply    = 1
	bundleCommitReq    = 4
	bundleCommitReply  = 5
	bundleDiscardReq   = 6
	bundleDiscardReply = 7
	bundleAtomic       = 1
	bundleOrdered      = 2
)

// msg is one OpenFlow message as read from the wire, header split out.
type msg struct {
	version uint8
	typ     uint8
	xid     uint32
	body    []byte // after the 8-byte header
}

// appendHeader appends an OpenFlow header with a zero length; finishMsg fills it in.
func appendHeader(b []byte, v Version, typ uint8, xid uint32) []byte {
	b = append(b, uint8(v), typ, 0, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

// finishMsg sets the length of the message that starts at b[start:].
func finishMsg(b []byte, start int) ([]byte, error) {
	n := len(b) - start
	if n > maxMsgLen {
		return nil, fmt.Errorf("openflow: message of %d bytes exceeds the 65535-byte limit", n)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(n))
	return b, nil
}

// readMsg reads one message. OpenFlow lengths cover the header, so a length under 8 is a
// framing error after which the stream cannot be resynchronised.
func readMsg(r io.Reader) (msg, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return msg{}, err
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n < headerLen {
		return msg{}, fmt.Errorf("openflow: message length %d below header size", n)
	}
	m := msg{version: h[0], typ: h[1], xid: binary.BigEndian.Uint32(h[4:]), body: make([]byte, n-headerLen)}
	if _, err := io.ReadFull(r, m.body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return msg{}, err
	}
	return m, nil
}

// pad8 appends zero bytes until len(b)-start is a multiple of 8, as OpenFlow requires for
// matches, actions and instructions.
func pad8(b []byte, start int) []byte {
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}
