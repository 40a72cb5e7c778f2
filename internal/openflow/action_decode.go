package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// parseActions decodes an action list; what it does not model becomes RawAction, so
// decoding never fails on well-framed input.
func parseActions(b []byte) ([]Action, error) {
	items, err := splitActions(b)
	if err != nil {
		return nil, err
	}
	out := make([]Action, len(items))
	for i, item := range items {
		if a, ok := parseAction(item, false).(Action); ok {
			out[i] = a
		} else {
			out[i] = RawAction{append([]byte(nil), item...)}
		}
	}
	return out, nil
}

// splitActions cuts a list into its actions by their length fields.
func splitActions(b []byte) ([][]byte, error) {
	var items [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errors.New("openflow: action header truncated")
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n%8 != 0 || n > len(b) {
			return nil, fmt.Errorf("openflow: action length %d of %d", n, len(b))
		}
		items = append(items, b[:n])
		b = b[n:]
	}
	return items, nil
}

// parseAction decodes one well-framed action: an Action, a *NAT (only with inCT, the
// nested list of a ct action), or a RawAction.
func parseAction(b []byte, inCT bool) any {
	raw := RawAction{append([]byte(nil), b...)}
	typ := binary.BigEndian.Uint16(b)
	switch {
	case typ == actOutput && len(b) == 16:
		a := Output{Port: binary.BigEndian.Uint32(b[4:])}
		if binary.BigEndian.Uint16(b[8:]) != a.maxLen() {
			return raw
		}
		return a
	case typ == actSetField && len(b) >= 8:
		h := binary.BigEndian.Uint32(b[4:])
		val := b[8:]
		switch {
		case h == oxmEthDst && !inCT:
			return SetEthDst{net.HardwareAddr(append([]byte(nil), val[:6]...))}
		case h == oxmEthSrc && !inCT:
			return SetEthSrc{net.HardwareAddr(append([]byte(nil), val[:6]...))}
		case h == oxmIPv4Src && !inCT && len(val) >= 4:
			return SetIPv4Src{netip.AddrFrom4([4]byte(val[:4]))}
		case h == oxmIPv4Dst && !inCT && len(val) >= 4:
			return SetIPv4Dst{netip.AddrFrom4([4]byte(val[:4]))}
		case h == nxmCTMark && inCT:
			return SetCTMark{binary.BigEndian.Uint32(val)}
		}
	case typ == actExperimenter && len(b) >= 10 && binary.BigEndian.Uint32(b[4:]) == nxVendorID:
		switch binary.BigEndian.Uint16(b[8:]) {
		case nxastResubmitTable:
			if len(b) == 16 && binary.BigEndian.Uint16(b[10:]) == ofp10InPort && !inCT {
				return Resubmit{Table: b[12]}
			}
		case nxastCT:
			if a, ok := parseCT(b); ok && !inCT {
				return a
			}
		case nxastNAT:
			if n, ok := parseNAT(b); ok && inCT {
				return n
			}
		}
	}
	return raw
}

func parseCT(b []byte) (CT, bool) {
	if len(b) < 24 {
		return CT{}, false
	}
	flags := binary.BigEndian.Uint16(b[10:])
	if flags&^1 != 0 || binary.BigEndian.Uint32(b[12:]) != 0 || binary.BigEndian.Uint16(b[22:]) != 0 {
		return CT{}, false // force, a zone from a field, or an ALG: not modelled
	}
	a := CT{Commit: flags&1 != 0, Zone: binary.BigEndian.Uint16(b[16:])}
	if t := b[18]; t != ctRecircNone {
		a.Recirc, a.Table = true, t
	}
	items, err := splitActions(b[24:])
	if err != nil {
		return CT{}, false
	}
	// Anything but a leading nat and set_field ct_mark makes the whole ct raw: encoding the
	// CT again would not give the same actions in the same order.
	for i, item := range items {
		switch x := parseAction(item, true).(type) {
		case *NAT:
			if i != 0 {
				return CT{}, false
			}
			a.NAT = x
		case SetCTMark:
			a.Exec = append(a.Exec, x)
		default:
			return CT{}, false
		}
	}
	return a, true
}
