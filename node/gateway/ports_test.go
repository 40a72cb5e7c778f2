package gateway

import (
	"errors"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

func port(name string, ids map[string]string, ifaces ...ovs.Interface) ovs.BridgePort {
	return ovs.BridgePort{Name: name, ExternalIDs: ids, Interfaces: ifaces}
}

var brLocal = port("br-phy", nil, ovs.Interface{Name: "br-phy", Type: "internal", OFPort: 65534})

func uplinkPort(ofport int, errText string) ovs.BridgePort {
	return port("eth0", nil, ovs.Interface{Name: "eth0", OFPort: ofport, Error: errText})
}

// patchPortOf is the patch port ovn-controller makes for localnet port lport.
func patchPortOf(lport string, ofport int) ovs.BridgePort {
	name := "patch-" + lport + "-to-br-int"
	return port(name, map[string]string{KeyLocalnetPort: lport},
		ovs.Interface{Name: name, Type: "patch", OFPort: ofport})
}

func TestFindPorts(t *testing.T) {
	const localnet = "breth0_node1"
	up := uplinkPort(1, "")
	for _, tc := range []struct {
		name  string
		ports []ovs.BridgePort
		want  Ports
		wait  bool // errNotReady
	}{
		{"uplink only", []ovs.BridgePort{brLocal, up}, Ports{Uplink: 1}, false},
		{"with the patch port", []ovs.BridgePort{brLocal, patchPortOf(localnet, 5), up}, Ports{Uplink: 1, Patch: 5}, false},
		{"another localnet's patch port", []ovs.BridgePort{brLocal, up, patchPortOf("breth0_node2", 5)}, Ports{Uplink: 1}, false},
		{"patch port not numbered yet", []ovs.BridgePort{brLocal, up, patchPortOf(localnet, 0)}, Ports{Uplink: 1}, false},
		{"patch port failed", []ovs.BridgePort{brLocal, up, patchPortOf(localnet, -1)}, Ports{Uplink: 1}, false},
		{"marked but not a patch", []ovs.BridgePort{brLocal, up,
			port("x", map[string]string{KeyLocalnetPort: localnet}, ovs.Interface{Name: "x", OFPort: 7})}, Ports{Uplink: 1}, false},
		{"uplink not numbered yet", []ovs.BridgePort{brLocal, uplinkPort(0, ""), patchPortOf(localnet, 5)}, Ports{}, true},
		{"uplink failed", []ovs.BridgePort{brLocal, uplinkPort(-1, "could not open network device eth0 (No such device)")}, Ports{}, true},
		{"no uplink", []ovs.BridgePort{brLocal}, Ports{}, true},
	} {
		got, err := findPorts(tc.ports, "eth0", localnet, "")
		var wait errNotReady
		if errors.As(err, &wait) != tc.wait || (err != nil && !tc.wait) {
			t.Errorf("%s: error %v, want waiting=%v", tc.name, err, tc.wait)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// vnicPort is the host vNIC's internal port the Windows agent adds to the bridge.
func vnicPort(ofport int) ovs.BridgePort {
	const name = "vEthernet (Ethernet0)"
	return port(name, nil, ovs.Interface{Name: name, Type: "internal", OFPort: ofport})
}

// TestFindPortsHostPort: a named host port (Windows' host vNIC) is found by name; until
// ovs-vswitchd has numbered it the controller waits, as for the uplink. Without a name the
// host port is the bridge's own interface (Host 0, LOCAL), whatever other internal ports
// the bridge has.
func TestFindPortsHostPort(t *testing.T) {
	const localnet, vnic = "breth0_node1", "vEthernet (Ethernet0)"
	up := port("Ethernet0", nil, ovs.Interface{Name: "Ethernet0", OFPort: 1})
	for _, tc := range []struct {
		name  string
		host  string
		ports []ovs.BridgePort
		want  Ports
		wait  bool // errNotReady
	}{
		{"named host port", vnic, []ovs.BridgePort{brLocal, up, vnicPort(3)}, Ports{Uplink: 1, Host: 3}, false},
		{"with the patch port", vnic, []ovs.BridgePort{brLocal, vnicPort(3), patchPortOf(localnet, 5), up}, Ports{Uplink: 1, Patch: 5, Host: 3}, false},
		{"host port not numbered yet", vnic, []ovs.BridgePort{brLocal, up, vnicPort(0), patchPortOf(localnet, 5)}, Ports{}, true},
		{"host port failed", vnic, []ovs.BridgePort{brLocal, up, vnicPort(-1)}, Ports{}, true},
		{"host port not added yet", vnic, []ovs.BridgePort{brLocal, up, patchPortOf(localnet, 5)}, Ports{}, true},
		{"uplink not numbered yet", vnic, []ovs.BridgePort{brLocal, port("Ethernet0", nil, ovs.Interface{Name: "Ethernet0"}), vnicPort(3)}, Ports{}, true},
		{"no name: LOCAL, the vNIC port is nobody's", "", []ovs.BridgePort{brLocal, up, vnicPort(3), patchPortOf(localnet, 5)}, Ports{Uplink: 1, Patch: 5}, false},
	} {
		got, err := findPorts(tc.ports, "Ethernet0", localnet, tc.host)
		var wait errNotReady
		if errors.As(err, &wait) != tc.wait || (err != nil && !tc.wait) {
			t.Errorf("%s: error %v, want waiting=%v", tc.name, err, tc.wait)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
