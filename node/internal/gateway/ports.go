package gateway

import (
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/node/internal/ovs"
)

// KeyLocalnetPort is the Port external_ids key ovn-controller puts on the patch ports it
// makes for a localnet logical port (on the bridge ovn-bridge-mappings names): the logical
// port's name. It is on the Port row, not on the Interface.
const KeyLocalnetPort = "ovn-localnet-port"

// maxPort is the highest OpenFlow number a physical or patch port can have (OFPP_MAX in
// OpenFlow 1.0 terms, which OVS keeps to); above it are the reserved ports.
const maxPort = 0xfeff

// LocalnetPort is the name the master gives node's localnet logical port, on the node's
// external switch ext_<node> (master/topology.LocalnetPortName).
func LocalnetPort(node string) string { return "breth0_" + node }

// errNoUplink says the uplink has no usable OpenFlow port number yet.
type errNoUplink struct{ reason string }

func (e errNoUplink) Error() string { return e.reason }

// findPorts reads the port numbers of the gateway bridge from its ports as cached: the
// uplink by its name, the patch port by the localnet port it stands for and its interface's
// type. ovs-vswitchd writes an interface's ofport once it has added it: until then it is
// empty (0), and -1 if adding failed. Without a usable uplink number the error is an
// errNoUplink; without a usable patch port, Patch is 0.
func findPorts(ports []ovs.BridgePort, uplink, localnet string) (Ports, error) {
	var p Ports
	found := false
	for _, port := range ports {
		if len(port.Interfaces) != 1 {
			continue // a bond: neither the uplink the agent added nor a patch port
		}
		i := port.Interfaces[0]
		switch {
		case port.Name == uplink:
			found = true
			if !usable(i.OFPort) {
				reason := fmt.Sprintf("uplink %s has no OpenFlow port number yet (ofport %d)", uplink, i.OFPort)
				if i.Error != "" {
					reason += ": " + i.Error
				}
				return Ports{}, errNoUplink{reason}
			}
			p.Uplink = uint32(i.OFPort)
		case port.ExternalIDs[KeyLocalnetPort] == localnet && i.Type == "patch" && usable(i.OFPort):
			p.Patch = uint32(i.OFPort)
		}
	}
	if !found {
		return Ports{}, errNoUplink{fmt.Sprintf("uplink %s is not a port of the bridge", uplink)}
	}
	return p, nil
}

func usable(ofport int) bool { return ofport > 0 && ofport <= maxPort }
