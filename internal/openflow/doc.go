// Package openflow is a small declarative OpenFlow client for Open vSwitch bridges: the node
// agent states the flows it owns, by cookie, and Client.Sync makes the bridge hold exactly
// those, re-installing them whenever ovs-vswitchd comes back.
//
// It speaks OpenFlow 1.3 and 1.4 (bundles make a Sync atomic on 1.4) with the Nicira
// extensions OVS needs for a gateway bridge: ct(), nat, resubmit, ct_state/ct_zone/ct_mark
// matches. The encoders are written from the OpenFlow specs and OVS's documented extension
// layouts; see README.md for what the bridge must allow and the OVS behaviour the code
// relies on.
package openflow
