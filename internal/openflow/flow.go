package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Flow is one OpenFlow flow entry: no timeouts, no flags, as a declarative owner wants them.
type Flow struct {
	Table    uint8
	Priority uint16
	// Cookie is the owner's key (see Client.Sync, which sets it).
	Cookie uint64
	Match  Match
	// Actions run in order (OpenFlow apply-actions). No Actions and no GotoTable drop the
	// packet.
	Actions []Action
	// GotoTable, when not 0, continues in that table after Actions (goto_table). OpenFlow
	// allows only a later table, which is why 0 can mean "none"; use Resubmit otherwise.
	GotoTable uint8
}

// Validate checks that f can be encoded. It does not check what only the switch knows
// (ports, the table order of GotoTable): the switch reports those when f is written.
func (f *Flow) Validate() error {
	if f.Table == tableAll {
		return errors.New("openflow: table 255 is not a flow table")
	}
	if err := f.Match.Validate(); err != nil {
		return err
	}
	for _, a := range f.Actions {
		if a == nil {
			return errors.New("openflow: nil action")
		}
		if err := a.validate(); err != nil {
			return err
		}
	}
	if f.GotoTable == tableAll {
		return errors.New("openflow: goto_table 255")
	}
	return nil
}

// String renders f in ovs-ofctl's syntax (cookie left out): "table=1,priority=100,ip
// actions=LOCAL".
func (f *Flow) String() string {
	s := f.key()
	return s + " actions=" + f.actionsString()
}

// key is what makes a flow unique in a switch: OVS keeps one flow per table, priority and
// match, and an add with the same three replaces the flow.
func (f *Flow) key() string {
	s := fmt.Sprintf("table=%d,priority=%d", f.Table, f.Priority)
	if m := f.Match.String(); m != "" {
		s += "," + m
	}
	return s
}

func (f *Flow) actionsString() string {
	s := actionsString(f.Actions)
	if f.GotoTable != 0 {
		if s != "" {
			s += ","
		}
		s += fmt.Sprintf("goto_table:%d", f.GotoTable)
	}
	if s == "" {
		return "drop"
	}
	return s
}

// Instruction types (OpenFlow 1.3 section 7.2.4).
const (
	instGotoTable    = 1
	instApplyActions = 4
)

// appendFlowMod appends an OFPT_FLOW_MOD. For fmDeleteStrict the cookie is a filter
// (mask all ones), so a delete never removes another owner's flow with the same match.
func appendFlowMod(b []byte, v Version, xid uint32, cmd uint8, f *Flow) ([]byte, error) {
	start := len(b)
	b = appendHeader(b, v, typeFlowMod, xid)
	b = binary.BigEndian.AppendUint64(b, f.Cookie)
	cookieMask := uint64(0)
	if cmd == fmDeleteStrict {
		cookieMask = ^uint64(0)
	}
	b = binary.BigEndian.AppendUint64(b, cookieMask)
	b = append(b, f.Table, cmd)
	b = binary.BigEndian.AppendUint16(b, 0) // idle_timeout
	b = binary.BigEndian.AppendUint16(b, 0) // hard_timeout
	b = binary.BigEndian.AppendUint16(b, f.Priority)
	b = binary.BigEndian.AppendUint32(b, noBuffer)
	b = binary.BigEndian.AppendUint32(b, portAny)  // out_port: no filter
	b = binary.BigEndian.AppendUint32(b, groupAny) // out_group: no filter
	b = binary.BigEndian.AppendUint16(b, 0)        // flags
	b = binary.BigEndian.AppendUint16(b, 0)        // pad (1.3), importance (1.4)
	b = appendMatch(b, &f.Match)
	if cmd != fmDeleteStrict {
		b = appendInstructions(b, f)
	}
	return finishMsg(b, start)
}

func appendInstructions(b []byte, f *Flow) []byte {
	if len(f.Actions) > 0 {
		start := len(b)
		b = binary.BigEndian.AppendUint16(b, instApplyActions)
		b = append(b, 0, 0, 0, 0, 0, 0) // length (below), pad
		for _, a := range f.Actions {
			b = a.appendTo(b)
		}
		binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	}
	if f.GotoTable != 0 {
		b = binary.BigEndian.AppendUint16(b, instGotoTable)
		b = binary.BigEndian.AppendUint16(b, 8)
		b = append(b, f.GotoTable, 0, 0, 0)
	}
	return b
}

// appendFlowStatsRequest appends an OFPMP_FLOW request for all tables, filtered by cookie.
func appendFlowStatsRequest(b []byte, v Version, xid uint32, cookie uint64) ([]byte, error) {
	start := len(b)
	b = appendHeader(b, v, typeMultipartReq, xid)
	b = binary.BigEndian.AppendUint16(b, mpFlow)
	b = append(b, 0, 0, 0, 0, 0, 0) // flags, pad
	b = append(b, tableAll, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, portAny)
	b = binary.BigEndian.AppendUint32(b, groupAny)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, ^uint64(0))
	b = appendMatch(b, &Match{})
	return finishMsg(b, start)
}

// parseFlowStats decodes the body of one OFPMP_FLOW reply; more is the REPLY_MORE flag.
func parseFlowStats(body []byte) (flows []Flow, more bool, err error) {
	if len(body) < 8 || binary.BigEndian.Uint16(body) != mpFlow {
		return nil, false, errors.New("openflow: not a flow stats reply")
	}
	more = binary.BigEndian.Uint16(body[2:])&mpReplyMore != 0
	for b := body[8:]; len(b) > 0; {
		if len(b) < 2 {
			return nil, false, errors.New("openflow: flow stats truncated")
		}
		n := int(binary.BigEndian.Uint16(b))
		if n < 56 || n > len(b) {
			return nil, false, fmt.Errorf("openflow: flow stats entry of %d bytes (%d left)", n, len(b))
		}
		f, err := parseFlowStatsEntry(b[:n])
		if err != nil {
			return nil, false, err
		}
		flows = append(flows, f)
		b = b[n:]
	}
	return flows, more, nil
}

// parseFlowStatsEntry decodes one ofp_flow_stats (48 fixed bytes, match, instructions).
func parseFlowStatsEntry(e []byte) (Flow, error) {
	f := Flow{
		Table:    e[2],
		Priority: binary.BigEndian.Uint16(e[12:]),
		Cookie:   binary.BigEndian.Uint64(e[24:]),
	}
	m, n, err := parseMatch(e[48:])
	if err != nil {
		// Keep what we cannot model: the flow then differs from every desired one and
		// Sync deletes it by these very bytes.
		_, mlen := rawMatchLen(e[48:])
		if mlen == 0 {
			return f, err
		}
		m, n = Match{Raw: append([]byte(nil), e[48:48+mlen]...)}, mlen
	}
	f.Match = m
	for ins := e[48+n:]; len(ins) > 0; {
		if len(ins) < 4 {
			return f, errors.New("openflow: instruction truncated")
		}
		typ, l := binary.BigEndian.Uint16(ins), int(binary.BigEndian.Uint16(ins[2:]))
		if l < 8 || l > len(ins) {
			return f, fmt.Errorf("openflow: instruction length %d of %d", l, len(ins))
		}
		switch {
		case typ == instApplyActions && len(f.Actions) == 0 && f.GotoTable == 0:
			if f.Actions, err = parseActions(ins[8:l]); err != nil {
				return f, err
			}
		case typ == instGotoTable && l == 8 && f.GotoTable == 0 && ins[4] != 0:
			f.GotoTable = ins[4]
		default:
			f.Actions = append(f.Actions, RawAction{append([]byte(nil), ins[:l]...)})
		}
		ins = ins[l:]
	}
	return f, nil
}

// rawMatchLen returns the declared and padded length of the ofp_match at the start of b,
// or zeros if it is not framed well.
func rawMatchLen(b []byte) (int, int) {
	if len(b) < 4 {
		return 0, 0
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	padded := (n + 7) / 8 * 8
	if n < 4 || padded > len(b) {
		return 0, 0
	}
	return n, padded
}
