package ovs

import (
	"context"
	"fmt"
)

// The Open_vSwitch external_ids ovn-controller reads to register its chassis.
const (
	KeySystemID       = "system-id"
	KeyHostname       = "hostname"
	KeyRemote         = "ovn-remote"
	KeyEncapType      = "ovn-encap-type"
	KeyEncapIP        = "ovn-encap-ip"
	KeyBridgeMappings = "ovn-bridge-mappings"
	KeyDatapathType   = "ovn-bridge-datapath-type"
	// KeyRemoteProbe is how long ovn-controller lets its SB connection be silent before it
	// probes, and waits for the answer, in milliseconds (OVN's default is 5000).
	KeyRemoteProbe = "ovn-remote-probe-interval"
	// KeyBridgeRemote is where an ovn-controller of OVN 24.09 or later dials br-int instead
	// of <OVS_RUNDIR>/br-int.mgmt (a remote chassis, docs/remote-chassis.md).
	KeyBridgeRemote = "ovn-bridge-remote"
)

// Chassis is what the node tells ovn-controller about itself.
type Chassis struct {
	// SystemID is the chassis name used when the database has none yet. An existing
	// system-id is kept: the SB knows the chassis by it, and changing it would orphan the
	// old chassis row and its port bindings.
	SystemID  string
	Hostname  string
	SBRemote  string // ovn-remote; empty leaves the key alone
	EncapType string // geneve or stt
	EncapIP   string
	// BridgeMappings is "physnet:br-phy"; empty leaves the key alone (an operator may
	// have set mappings of their own on a node without a gateway bridge).
	BridgeMappings string
	// DatapathType is the type ovn-controller gives the bridges it creates (netdev on the
	// userspace datapath); empty leaves the key alone.
	DatapathType string
	// BridgeRemote is ovn-bridge-remote; empty leaves the key alone.
	BridgeRemote string
	// RemoteProbe is ovn-remote-probe-interval in milliseconds; empty leaves the key alone.
	RemoteProbe string
}

// EnsureChassis writes the chassis settings into Open_vSwitch external_ids and returns the
// system-id in force. Idempotent: when everything is already as wanted it writes nothing.
func (s *Switch) EnsureChassis(ctx context.Context, ch Chassis) (string, error) {
	root, err := s.root(ctx)
	if err != nil {
		return "", err
	}
	systemID := root.ExternalIDs[KeySystemID]
	if systemID == "" {
		systemID = ch.SystemID
	}
	want := map[string]string{
		KeySystemID:  systemID,
		KeyHostname:  ch.Hostname,
		KeyEncapType: ch.EncapType,
		KeyEncapIP:   ch.EncapIP,
	}
	for k, v := range map[string]string{KeyRemote: ch.SBRemote, KeyBridgeMappings: ch.BridgeMappings, KeyDatapathType: ch.DatapathType, KeyBridgeRemote: ch.BridgeRemote, KeyRemoteProbe: ch.RemoteProbe} {
		if v != "" {
			want[k] = v
		}
	}
	diff := missing(root.ExternalIDs, want)
	if len(diff) == 0 {
		return systemID, nil
	}
	ops, err := s.c.Where(root).Mutate(root, setKeys(&root.ExternalIDs, diff)...)
	if err != nil {
		return "", err
	}
	err = s.transact(ctx, "writing chassis settings", func() bool {
		r, err := s.root(ctx)
		return err == nil && hasAll(r.ExternalIDs, want)
	}, ops...)
	if err != nil {
		return "", fmt.Errorf("chassis %s: %w", systemID, err)
	}
	return systemID, nil
}

// ChassisSettings returns the Open_vSwitch external_ids as cached.
func (s *Switch) ChassisSettings(ctx context.Context) (map[string]string, error) {
	root, err := s.root(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(root.ExternalIDs))
	for k, v := range root.ExternalIDs {
		out[k] = v
	}
	return out, nil
}
