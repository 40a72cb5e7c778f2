package hns

// HNS's v1 API (the one Get-HnsNetwork and New-HnsNetwork speak, through vmcompute.dll's
// HNSCall) is how the node enables the OVS extension and reads a network's adapter and
// extension state back: a v1 network carries them as NetworkAdapterName and
// Extensions[].IsEnabled, which is what every field-proven tool reads (Antrea's agent, the
// SDN scripts), whereas whether a v2 GET echoes the creation-time NetAdapterName and
// VSwitchExtension policies is not documented. The encoding lives here, without a build
// tag, so that it is tested on Linux; hcn_windows.go only makes the calls.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// v1Response is HNSCall's envelope around every answer.
type v1Response struct {
	Success   bool
	Error     string
	ErrorCode uint32
	Output    json.RawMessage
}

// v1Network is the part of a v1 network the node reads.
type v1Network struct {
	ID                 string `json:"ID"`
	Name               string
	Type               string
	NetworkAdapterName string
	Extensions         []v1Extension
	Subnets            []v1Subnet
}

// v1Subnet is an IPAM subnet as a v1 network lists it (hcsshim's internal/hns Subnet).
type v1Subnet struct {
	AddressPrefix  string
	GatewayAddress string
}

// v1Extension is a vSwitch extension as a v1 network lists it: every extension installed
// on the host, enabled on this network's switch or not.
type v1Extension struct {
	ID        string `json:"Id"`
	IsEnabled bool
	Name      string `json:",omitempty"`
}

// decodeV1 unwraps an HNSCall answer into out (if not nil), or returns HNS's error.
func decodeV1(answer []byte, out any) error {
	var r v1Response
	if err := json.Unmarshal(answer, &r); err != nil {
		return fmt.Errorf("HNS v1 answer %q: %w", truncate(answer), err)
	}
	if !r.Success {
		msg := strings.TrimSpace(r.Error)
		if msg == "" {
			msg = "no error text"
		}
		err := fmt.Errorf("HNS: %s (error code 0x%08X)", msg, r.ErrorCode)
		if strings.Contains(strings.ToLower(msg), "not found") {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return err
	}
	if out == nil || len(r.Output) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Output, out); err != nil {
		return fmt.Errorf("HNS v1 output %q: %w", truncate(r.Output), err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// applyV1 overwrites n's adapter, enabled extensions (upper case IDs) and subnets with v1's.
// The subnets too (review N7): the node compares them with its own to decide whether it may
// adopt the network, and a v2 GET's Ipams may come back normalised, with another route
// layout, or not at all, whereas v1's Subnets are what Get-HnsNetwork shows and every
// field-proven tool reads (v2's are kept only if v1 lists none). An unparsable v1 subnet
// is kept as the zero prefix, so that the comparison fails rather than passes.
func applyV1(n *Network, v v1Network) {
	if len(v.Subnets) > 0 {
		n.Subnets = nil
	}
	for _, s := range v.Subnets {
		p, _ := netip.ParsePrefix(s.AddressPrefix)
		gw, _ := netip.ParseAddr(s.GatewayAddress)
		n.Subnets = append(n.Subnets, Subnet{Prefix: p, Gateway: gw})
	}
	n.Adapter = v.NetworkAdapterName
	n.Extensions = nil
	for _, e := range v.Extensions {
		if e.IsEnabled {
			n.Extensions = append(n.Extensions, strings.ToUpper(e.ID))
		}
	}
}

// v1EnableExtension is the body of the v1 POST /networks/<id> that enables the extension
// id on the network's switch (what Enable-VMSwitchExtension does through WMI).
func v1EnableExtension(id string) string {
	b, _ := json.Marshal(struct{ Extensions []v1Extension }{[]v1Extension{{ID: strings.ToUpper(id), IsEnabled: true}}})
	return string(b)
}

// errExtensionNotEnabled: HNS accepted the request, yet the network does not report the
// extension enabled.
var errExtensionNotEnabled = errors.New("the network does not report the extension enabled")

// checkEnabled tells why v does not report extension id enabled, or returns nil.
func checkEnabled(v v1Network, id string) error {
	for _, e := range v.Extensions {
		if strings.EqualFold(e.ID, id) {
			if e.IsEnabled {
				return nil
			}
			return fmt.Errorf("%w: %s (%s) is installed but disabled on network %q; Hyper-V enables one forwarding extension per switch, "+
				"and Open vSwitch on one switch only: see Get-VMSwitchExtension -VMSwitchName %q", errExtensionNotEnabled, e.Name, e.ID, v.Name, v.Name)
		}
	}
	return fmt.Errorf("%w: network %q lists no extension %s: is the signed Open vSwitch extension installed (Get-VMSystemSwitchExtension)?",
		errExtensionNotEnabled, v.Name, id)
}
