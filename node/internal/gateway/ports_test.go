package gateway

import (
	"errors"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/node/internal/ovs"
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
		wait  bool // errNoUplink
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
		got, err := findPorts(tc.ports, "eth0", localnet)
		var wait errNoUplink
		if errors.As(err, &wait) != tc.wait || (err != nil && !tc.wait) {
			t.Errorf("%s: error %v, want waiting=%v", tc.name, err, tc.wait)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
