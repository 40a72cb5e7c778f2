package gateway

import (
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// KeyLocalnetPort is the Port external_ids key ovn-controller puts on the patch ports it
// makes for a localnet logical port (on the bridge ovn-bridge-mappings names): the logical
// port's name. It is on the Port row, not on the Interface.
const KeyLocalnetPort = "ovn-localnet-port"

// maxPort is the highest OpenFlow number a physical or patch port can have (OFPP_MAX in
// OpenFlow 1.0 terms, which OVS keeps to); above it are the reserved ports.
const maxPort = 0xfeff

// errNotReady says a port the rules cannot do without (the uplink, or a named host port)
// has no usable OpenFlow port number yet.
type errNotReady struct{ reason string }

func (e errNotReady) Error() string { return e.reason }

// findPorts reads the port numbers of the gateway bridge from its ports as cached: the
// uplink by its name, the patch port by the localnet port it stands for and its interface's
// type, and the host port by its name (host; empty: the bridge's own interface, LOCAL).
// ovs-vswitchd writes an interface's ofport once it has added it: until then it is empty
// (0), and -1 if adding failed. Without a usable patch port, Patch is 0 and the rules are
// the host's part alone. Without a usable uplink or named host port the error is an
// errNotReady: the host's part itself needs them (no rule could stand in for the host
// port: LOCAL does not hold the node's address where a named port does).
func findPorts(ports []ovs.BridgePort, uplink, localnet, host string) (Ports, error) {
	var p Ports // Host 0: LOCAL
	foundUplink, foundHost := false, host == ""
	for _, port := range ports {
		if len(port.Interfaces) != 1 {
			continue // a bond: neither the uplink nor the host port the agent added, nor a patch port
		}
		i := port.Interfaces[0]
		switch {
		case port.Name == uplink:
			foundUplink = true
			n, err := number("uplink", port.Name, i)
			if err != nil {
				return Ports{}, err
			}
			p.Uplink = n
		case host != "" && port.Name == host:
			foundHost = true
			n, err := number("host port", port.Name, i)
			if err != nil {
				return Ports{}, err
			}
			p.Host = n
		case port.ExternalIDs[KeyLocalnetPort] == localnet && i.Type == "patch" && usable(i.OFPort):
			p.Patch = uint32(i.OFPort)
		}
	}
	if !foundUplink {
		return Ports{}, errNotReady{fmt.Sprintf("uplink %s is not a port of the bridge", uplink)}
	}
	if !foundHost {
		return Ports{}, errNotReady{fmt.Sprintf("host port %s is not a port of the bridge", host)}
	}
	return p, nil
}

// number is the OpenFlow number of the interface of the port the rules need (what says
// which), or an errNotReady.
func number(what, name string, i ovs.Interface) (uint32, error) {
	if usable(i.OFPort) {
		return uint32(i.OFPort), nil
	}
	reason := fmt.Sprintf("%s %s has no OpenFlow port number yet (ofport %d)", what, name, i.OFPort)
	if i.Error != "" {
		reason += ": " + i.Error
	}
	return 0, errNotReady{reason}
}

func usable(ofport int) bool { return ofport > 0 && ofport <= maxPort }
