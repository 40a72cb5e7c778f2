package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrorMsg is an OFPT_ERROR a switch sent in reply to one of our messages.
type ErrorMsg struct {
	Type, Code   uint16
	Experimenter uint32 // for Type 0xffff (OFPET_EXPERIMENTER): 0x2320 for OVS's Nicira errors
	Data         []byte // the start of the offending message
}

// errExperimenter is OFPET_EXPERIMENTER: OVS sends its own (Nicira) error codes this way
// from OpenFlow 1.2 on, the code in the "exp_code" field.
const errExperimenter = 0xffff

func parseError(body []byte) (*ErrorMsg, error) {
	if len(body) < 4 {
		return nil, errors.New("openflow: error message truncated")
	}
	e := &ErrorMsg{Type: binary.BigEndian.Uint16(body), Code: binary.BigEndian.Uint16(body[2:])}
	data := body[4:]
	if e.Type == errExperimenter && len(data) >= 4 {
		e.Experimenter, data = binary.BigEndian.Uint32(data), data[4:]
	}
	e.Data = append([]byte(nil), data...)
	return e, nil
}

func (e *ErrorMsg) Error() string {
	if e.Type == errExperimenter {
		return fmt.Sprintf("OFPET_EXPERIMENTER(experimenter 0x%x, code %d)", e.Experimenter, e.Code)
	}
	t, ok := errorTypes[e.Type]
	if !ok {
		return fmt.Sprintf("error type %d code %d", e.Type, e.Code)
	}
	code := fmt.Sprintf("code %d", e.Code)
	if int(e.Code) < len(t.codes) {
		code = t.codes[e.Code]
	}
	return fmt.Sprintf("%s/%s (%d/%d)", t.name, code, e.Type, e.Code)
}

// errorTypes names OpenFlow 1.3/1.4 error types and codes (spec section 7.4.4); the codes
// a declarative flow writer can meet are all here.
var errorTypes = map[uint16]struct {
	name  string
	codes []string
}{
	0: {"OFPET_HELLO_FAILED", []string{"OFPHFC_INCOMPATIBLE", "OFPHFC_EPERM"}},
	1: {"OFPET_BAD_REQUEST", []string{"OFPBRC_BAD_VERSION", "OFPBRC_BAD_TYPE", "OFPBRC_BAD_MULTIPART",
		"OFPBRC_BAD_EXPERIMENTER", "OFPBRC_BAD_EXP_TYPE", "OFPBRC_EPERM", "OFPBRC_BAD_LEN",
		"OFPBRC_BUFFER_EMPTY", "OFPBRC_BUFFER_UNKNOWN", "OFPBRC_BAD_TABLE_ID", "OFPBRC_IS_SLAVE",
		"OFPBRC_BAD_PORT", "OFPBRC_BAD_PACKET", "OFPBRC_MULTIPART_BUFFER_OVERFLOW"}},
	2: {"OFPET_BAD_ACTION", []string{"OFPBAC_BAD_TYPE", "OFPBAC_BAD_LEN", "OFPBAC_BAD_EXPERIMENTER",
		"OFPBAC_BAD_EXP_TYPE", "OFPBAC_BAD_OUT_PORT", "OFPBAC_BAD_ARGUMENT", "OFPBAC_EPERM",
		"OFPBAC_TOO_MANY", "OFPBAC_BAD_QUEUE", "OFPBAC_BAD_OUT_GROUP", "OFPBAC_MATCH_INCONSISTENT",
		"OFPBAC_UNSUPPORTED_ORDER", "OFPBAC_BAD_TAG", "OFPBAC_BAD_SET_TYPE", "OFPBAC_BAD_SET_LEN",
		"OFPBAC_BAD_SET_ARGUMENT"}},
	3: {"OFPET_BAD_INSTRUCTION", []string{"OFPBIC_UNKNOWN_INST", "OFPBIC_UNSUP_INST",
		"OFPBIC_BAD_TABLE_ID", "OFPBIC_UNSUP_METADATA", "OFPBIC_UNSUP_METADATA_MASK",
		"OFPBIC_BAD_EXPERIMENTER", "OFPBIC_BAD_EXP_TYPE", "OFPBIC_BAD_LEN", "OFPBIC_EPERM"}},
	4: {"OFPET_BAD_MATCH", []string{"OFPBMC_BAD_TYPE", "OFPBMC_BAD_LEN", "OFPBMC_BAD_TAG",
		"OFPBMC_BAD_DL_ADDR_MASK", "OFPBMC_BAD_NW_ADDR_MASK", "OFPBMC_BAD_WILDCARDS",
		"OFPBMC_BAD_FIELD", "OFPBMC_BAD_VALUE", "OFPBMC_BAD_MASK", "OFPBMC_BAD_PREREQ",
		"OFPBMC_DUP_FIELD", "OFPBMC_EPERM"}},
	5: {"OFPET_FLOW_MOD_FAILED", []string{"OFPFMFC_UNKNOWN", "OFPFMFC_TABLE_FULL",
		"OFPFMFC_BAD_TABLE_ID", "OFPFMFC_OVERLAP", "OFPFMFC_EPERM", "OFPFMFC_BAD_TIMEOUT",
		"OFPFMFC_BAD_COMMAND", "OFPFMFC_BAD_FLAGS", "OFPFMFC_CANT_SYNC", "OFPFMFC_BAD_PRIORITY",
		"OFPFMFC_IS_SYNC"}},
	10: {"OFPET_SWITCH_CONFIG_FAILED", nil},
	11: {"OFPET_ROLE_REQUEST_FAILED", nil},
	14: {"OFPET_BAD_PROPERTY", nil},
	17: {"OFPET_BUNDLE_FAILED", []string{"OFPBFC_UNKNOWN", "OFPBFC_EPERM", "OFPBFC_BAD_ID",
		"OFPBFC_BUNDLE_EXIST", "OFPBFC_BUNDLE_CLOSED", "OFPBFC_OUT_OF_BUNDLES", "OFPBFC_BAD_TYPE",
		"OFPBFC_BAD_FLAGS", "OFPBFC_MSG_BAD_LEN", "OFPBFC_MSG_BAD_XID", "OFPBFC_MSG_UNSUP",
		"OFPBFC_MSG_CONFLICT", "OFPBFC_MSG_TOO_MANY", "OFPBFC_MSG_FAILED", "OFPBFC_TIMEOUT",
		"OFPBFC_BUNDLE_IN_PROGRESS"}},
}

// FlowError is the switch rejecting one flow-mod of a Sync.
type FlowError struct {
	Op     string // "add" or "delete"
	Cookie uint64
	Flow   string // Flow.String()
	Err    *ErrorMsg
}

// Error names the flow as ovs-ofctl would print it; Sync's error around it names the cookie.
func (e *FlowError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Op, e.Flow, e.Err)
}

func (e *FlowError) Unwrap() error { return e.Err }
