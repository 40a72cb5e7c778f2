package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// NATKind says which address a NAT translates.
type NATKind uint8

const (
	// NATRestore, a bare "nat", applies the translation already set up for the connection
	// (the reverse one for replies) and sets up none.
	NATRestore NATKind = iota
	NATSrc
	NATDst
)

// NAT is the nat(...) inside ct: Kind, and for NATSrc/NATDst the IPv4 address range and
// the optional port range. A zero IPMax or PortMax means a single address or port.
type NAT struct {
	Kind             NATKind
	IPMin, IPMax     netip.Addr
	PortMin, PortMax uint16
}

const (
	natFlagSrc       = 1
	natFlagDst       = 2
	natRangeIPv4Min  = 1
	natRangeIPv4Max  = 2
	natRangeProtoMin = 16
	natRangeProtoMax = 32
)

func (n *NAT) appendTo(b []byte) []byte {
	start := len(b)
	b = appendNXHeader(b, 0, nxastNAT)
	b = append(b, 0, 0) // pad
	flags := map[NATKind]uint16{NATSrc: natFlagSrc, NATDst: natFlagDst}[n.Kind]
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, 0) // range_present, below
	present := uint16(0)
	if n.IPMin.IsValid() {
		present |= natRangeIPv4Min
		b = append(b, n.IPMin.AsSlice()...)
		if n.IPMax.IsValid() {
			present |= natRangeIPv4Max
			b = append(b, n.IPMax.AsSlice()...)
		}
		// OVS ignores ports without an address range.
		if n.PortMin != 0 {
			present |= natRangeProtoMin
			b = binary.BigEndian.AppendUint16(b, n.PortMin)
		}
		if n.PortMax != 0 {
			present |= natRangeProtoMax
			b = binary.BigEndian.AppendUint16(b, n.PortMax)
		}
	}
	binary.BigEndian.PutUint16(b[start+14:], present)
	b = pad8(b, start)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

func (n *NAT) validate() error {
	switch {
	case n.Kind > NATDst:
		return fmt.Errorf("openflow: NAT kind %d", n.Kind)
	case n.Kind == NATRestore && (n.IPMin.IsValid() || n.IPMax.IsValid() || n.PortMin != 0 || n.PortMax != 0):
		return errors.New("openflow: a bare nat takes no range")
	case n.IPMin.IsValid() && !n.IPMin.Is4(), n.IPMax.IsValid() && !n.IPMax.Is4():
		return errors.New("openflow: NAT ranges are IPv4 only")
	case n.IPMax.IsValid() && (!n.IPMin.IsValid() || n.IPMax.Less(n.IPMin)):
		return errors.New("openflow: NAT IPMax without IPMin, or below it")
	case n.IPMin.IsValid() && n.IPMin.IsUnspecified():
		return errors.New("openflow: NAT address 0.0.0.0") // OVS reads 0 as "absent"
	case (n.PortMin != 0 || n.PortMax != 0) && !n.IPMin.IsValid():
		return errors.New("openflow: NAT ports need an address range")
	case n.PortMax != 0 && n.PortMax < n.PortMin:
		return errors.New("openflow: NAT PortMax below PortMin")
	}
	return nil
}

func (n *NAT) String() string {
	if n.Kind == NATRestore {
		return "nat"
	}
	s := map[NATKind]string{NATSrc: "src", NATDst: "dst"}[n.Kind]
	if !n.IPMin.IsValid() {
		return "nat(" + s + ")"
	}
	s += "=" + n.IPMin.String()
	if n.IPMax.IsValid() {
		s += "-" + n.IPMax.String()
	}
	if n.PortMin != 0 {
		s += fmt.Sprintf(":%d", n.PortMin)
		if n.PortMax != 0 {
			s += fmt.Sprintf("-%d", n.PortMax)
		}
	}
	return "nat(" + s + ")"
}

func parseNAT(b []byte) (*NAT, bool) {
	if len(b) < 16 {
		return nil, false
	}
	flags, present := binary.BigEndian.Uint16(b[12:]), binary.BigEndian.Uint16(b[14:])
	n := &NAT{Kind: map[uint16]NATKind{0: NATRestore, natFlagSrc: NATSrc, natFlagDst: NATDst}[flags]}
	if (flags != 0 && n.Kind == NATRestore) || present&^(natRangeIPv4Min|natRangeIPv4Max|natRangeProtoMin|natRangeProtoMax) != 0 {
		return nil, false // persistent/hash/random flags or IPv6 ranges: not modelled
	}
	opt := b[16:]
	take := func(size int) ([]byte, bool) {
		if len(opt) < size {
			return nil, false
		}
		v := opt[:size]
		opt = opt[size:]
		return v, true
	}
	for _, f := range []struct {
		bit  uint16
		size int
		set  func([]byte)
	}{
		{natRangeIPv4Min, 4, func(v []byte) { n.IPMin = netip.AddrFrom4([4]byte(v)) }},
		{natRangeIPv4Max, 4, func(v []byte) { n.IPMax = netip.AddrFrom4([4]byte(v)) }},
		{natRangeProtoMin, 2, func(v []byte) { n.PortMin = binary.BigEndian.Uint16(v) }},
		{natRangeProtoMax, 2, func(v []byte) { n.PortMax = binary.BigEndian.Uint16(v) }},
	} {
		if present&f.bit != 0 {
			v, ok := take(f.size)
			if !ok {
				return nil, false
			}
			f.set(v)
		}
	}
	return n, n.validate() == nil
}
