package openflow

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Action is one OpenFlow action: Output, Resubmit, CT, SetEthDst, SetEthSrc, SetIPv4Src,
// SetIPv4Dst, SetCTMark (only inside CT.Exec), or RawAction (only read back from a switch).
type Action interface {
	// appendTo appends the action's OpenFlow 1.3 encoding (a multiple of 8 bytes).
	appendTo(b []byte) []byte
	// validate checks the action as a top-level action (CT checks its own Exec list).
	validate() error
	String() string
}

// Action type numbers and Nicira subtypes (OVS include/openflow/nicira-ext.h, ofp-actions.c).
const (
	actOutput       = 0
	actSetField     = 25
	actExperimenter = 0xffff

	nxastResubmitTable = 14
	nxastCT            = 35
	nxastNAT           = 36

	maxLenNoBuffer = 0xffff // OFPCML_NO_BUFFER: send the whole packet to the controller
	ofp10InPort    = 0xfff8 // resubmit's in_port is a 16-bit OpenFlow 1.0 port number
)

// Output sends the packet to a port: a port number, or PortLocal, PortNormal, PortInPort,
// PortController.
type Output struct{ Port uint32 }

func (a Output) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, actOutput)
	b = binary.BigEndian.AppendUint16(b, 16)
	b = binary.BigEndian.AppendUint32(b, a.Port)
	b = binary.BigEndian.AppendUint16(b, a.maxLen())
	return append(b, 0, 0, 0, 0, 0, 0)
}

// maxLen is 0 except for the controller, which gets whole packets; OVS stores and returns
// max_len as written, so a fixed choice keeps flows comparable.
func (a Output) maxLen() uint16 {
	if a.Port == PortController {
		return maxLenNoBuffer
	}
	return 0
}

func (a Output) validate() error {
	if a.Port == 0 || a.Port == portAny {
		return fmt.Errorf("openflow: output to port %s", portName(a.Port))
	}
	return nil
}

func (a Output) String() string {
	switch a.Port {
	case PortLocal, PortNormal, PortInPort:
		return portName(a.Port)
	case PortController:
		return "CONTROLLER:65535"
	}
	return fmt.Sprintf("output:%d", a.Port)
}

// Resubmit is Nicira resubmit(,Table): look the packet up in Table and come back, keeping
// in_port. Unlike GotoTable it may go to any table, earlier ones included.
type Resubmit struct{ Table uint8 }

func (a Resubmit) appendTo(b []byte) []byte {
	b = appendNXHeader(b, 16, nxastResubmitTable)
	b = binary.BigEndian.AppendUint16(b, ofp10InPort)
	return append(b, a.Table, 0, 0, 0)
}

func (a Resubmit) validate() error {
	if a.Table == tableAll {
		return errors.New("openflow: resubmit to table 255")
	}
	return nil
}

func (a Resubmit) String() string { return fmt.Sprintf("resubmit(,%d)", a.Table) }

// CT is Nicira ct(...): send the packet through connection tracking in Zone, optionally
// commit the connection, apply NAT, set ct_mark (Exec, with Commit), and when Recirc is set
// continue with a copy of the packet in Table, where ct_state and friends can be matched.
type CT struct {
	Commit bool
	Zone   uint16
	Recirc bool
	Table  uint8    // with Recirc
	NAT    *NAT     // nil: none
	Exec   []Action // SetCTMark only; needs Commit
}

func (a CT) appendTo(b []byte) []byte {
	start := len(b)
	b = appendNXHeader(b, 0, nxastCT)
	flags := uint16(0)
	if a.Commit {
		flags |= 1 // NX_CT_F_COMMIT
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint32(b, 0) // zone_src 0: zone is the immediate below
	b = binary.BigEndian.AppendUint16(b, a.Zone)
	table := uint8(ctRecircNone)
	if a.Recirc {
		table = a.Table
	}
	b = append(b, table, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, 0) // alg: none
	if a.NAT != nil {
		b = a.NAT.appendTo(b)
	}
	for _, x := range a.Exec {
		b = x.appendTo(b)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

func (a CT) validate() error {
	if a.Recirc && a.Table == tableAll {
		return errors.New("openflow: ct(table=255)")
	}
	// OVS rejects (OFPBAC_BAD_ARGUMENT) nested actions other than a bare nat without commit.
	if !a.Commit && (len(a.Exec) > 0 || a.NAT != nil && a.NAT.Kind != NATRestore) {
		return errors.New("openflow: ct exec() or nat(src/dst) needs commit")
	}
	if a.NAT != nil {
		if err := a.NAT.validate(); err != nil {
			return err
		}
	}
	for _, x := range a.Exec {
		if _, ok := x.(SetCTMark); !ok {
			return fmt.Errorf("openflow: ct exec() holds %s; only set_field ct_mark is supported", x)
		}
	}
	return nil
}

func (a CT) String() string {
	var f []string
	if a.Commit {
		f = append(f, "commit")
	}
	if a.Recirc {
		f = append(f, fmt.Sprintf("table=%d", a.Table))
	}
	f = append(f, fmt.Sprintf("zone=%d", a.Zone))
	if a.NAT != nil {
		f = append(f, a.NAT.String())
	}
	if len(a.Exec) > 0 {
		f = append(f, "exec("+actionsString(a.Exec)+")")
	}
	return "ct(" + strings.Join(f, ",") + ")"
}

// SetEthDst is set_field:MAC->eth_dst.
type SetEthDst struct{ MAC net.HardwareAddr }

// SetEthSrc is set_field:MAC->eth_src.
type SetEthSrc struct{ MAC net.HardwareAddr }

// SetIPv4Src is set_field:IP->ip_src (the flow must match IPv4).
type SetIPv4Src struct{ IP netip.Addr }

// SetIPv4Dst is set_field:IP->ip_dst (the flow must match IPv4).
type SetIPv4Dst struct{ IP netip.Addr }

func (a SetIPv4Src) appendTo(b []byte) []byte { return appendSetField(b, oxmIPv4Src, a.IP.AsSlice()) }
func (a SetIPv4Dst) appendTo(b []byte) []byte { return appendSetField(b, oxmIPv4Dst, a.IP.AsSlice()) }
func (a SetIPv4Src) validate() error          { return validateSetIPv4(a.IP) }
func (a SetIPv4Dst) validate() error          { return validateSetIPv4(a.IP) }
func (a SetIPv4Src) String() string           { return fmt.Sprintf("set_field:%s->ip_src", a.IP) }
func (a SetIPv4Dst) String() string           { return fmt.Sprintf("set_field:%s->ip_dst", a.IP) }

func validateSetIPv4(ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("openflow: set_field IPv4 address %v", ip)
	}
	return nil
}

// SetCTMark is set_field:Mark->ct_mark; OVS allows it only inside CT.Exec.
type SetCTMark struct{ Mark uint32 }

func (a SetEthDst) appendTo(b []byte) []byte { return appendSetField(b, oxmEthDst, a.MAC) }
func (a SetEthSrc) appendTo(b []byte) []byte { return appendSetField(b, oxmEthSrc, a.MAC) }
func (a SetCTMark) appendTo(b []byte) []byte {
	return appendSetField(b, nxmCTMark, binary.BigEndian.AppendUint32(nil, a.Mark))
}

func (a SetEthDst) validate() error { return validateSetMAC(a.MAC) }
func (a SetEthSrc) validate() error { return validateSetMAC(a.MAC) }
func (a SetCTMark) validate() error {
	return errors.New("openflow: set_field ct_mark outside ct(exec(...))")
}

func (a SetEthDst) String() string { return fmt.Sprintf("set_field:%s->eth_dst", a.MAC) }
func (a SetEthSrc) String() string { return fmt.Sprintf("set_field:%s->eth_src", a.MAC) }
func (a SetCTMark) String() string { return fmt.Sprintf("set_field:0x%x->ct_mark", a.Mark) }

func validateSetMAC(mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("openflow: set_field MAC %v is not 6 bytes", mac)
	}
	return nil
}

// appendSetField appends OFPAT_SET_FIELD with an unmasked OXM. OVS encodes a whole-field
// set_field this way in OpenFlow 1.2-1.4 (not as Nicira reg_load), so it reads back equal.
func appendSetField(b []byte, oxm uint32, val []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint16(b, actSetField)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, oxm)
	b = append(b, val...)
	b = pad8(b, start)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// RawAction is an action or instruction read from a switch that this package does not
// model, kept as bytes so Dump can show it. It cannot be written: Sync rejects it.
type RawAction struct{ Data []byte }

func (a RawAction) appendTo(b []byte) []byte { return append(b, a.Data...) }
func (a RawAction) validate() error {
	return errors.New("openflow: a raw action read from the switch cannot be written")
}
func (a RawAction) String() string { return "raw(" + hex.EncodeToString(a.Data) + ")" }

// appendNXHeader appends the experimenter action header of a Nicira action; a zero length
// is filled in by the caller.
func appendNXHeader(b []byte, length, subtype uint16) []byte {
	b = binary.BigEndian.AppendUint16(b, actExperimenter)
	b = binary.BigEndian.AppendUint16(b, length)
	b = binary.BigEndian.AppendUint32(b, nxVendorID)
	return binary.BigEndian.AppendUint16(b, subtype)
}

func actionsString(as []Action) string {
	s := make([]string, len(as))
	for i, a := range as {
		if a == nil {
			s[i] = "<nil>" // Validate rejects it; error messages still print the flow
			continue
		}
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}
