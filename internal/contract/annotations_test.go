package contract

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPodNetworkRoundTrip(t *testing.T) {
	in := PodNetworkInfo{
		IPAddresses: []string{"10.244.1.5/24"},
		MACAddress:  "0a:58:0a:f4:01:05",
		GatewayIPs:  []string{"10.244.1.1"},
		Routes:      []Route{{Dest: "10.96.0.0/16", NextHop: "10.244.1.1"}},
	}
	s, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pn, err := ParsePodNetwork(s)
	if err != nil {
		t.Fatal(err)
	}
	if pn.IPs[0].String() != "10.244.1.5/24" || pn.MAC.String() != "0a:58:0a:f4:01:05" ||
		pn.Gateways[0].String() != "10.244.1.1" || pn.Routes[0].Dest.String() != "10.96.0.0/16" {
		t.Errorf("round trip: %+v", pn)
	}
}

func TestPodNetworkRejectsBadInput(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`not json`, "invalid character"},
		{`{"ipAddresses":[],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":["10.244.1.1"]}`, "no ipAddresses"},
		{`{"ipAddresses":["10.244.1.5"],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":["10.244.1.1"]}`, "ipAddresses"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"zz","gatewayIPs":["10.244.1.1"]}`, "macAddress"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"01:00:5e:00:00:01","gatewayIPs":["10.244.1.1"]}`, "unicast"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":["10.244.2.1"]}`, "none of the pod's subnets"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":["10.244.1.5"]}`, "none of the pod's subnets"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":[]}`, "no gatewayIPs"},
		{`{"ipAddresses":["10.244.1.5/24"],"macAddress":"0a:58:0a:f4:01:05","gatewayIPs":["10.244.1.1"],"routes":[{"dest":"10.96.0.0/16","nextHop":"192.168.0.1"}]}`, "next hop"},
	} {
		_, err := ParsePodNetwork(tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), PodNetworkKey) {
			t.Errorf("%s: got %v, want an error naming %s and %q", tc.value, err, PodNetworkKey, tc.want)
		}
	}
}

func TestNodeAnnotations(t *testing.T) {
	in := NodeChassisInfo{ChassisID: "node1", NodeIP: "172.18.0.1/24", GatewayMAC: "0a:58:ac:12:00:01", NextHop: "172.18.0.254", OS: "linux"}
	s, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := ParseNodeChassis(s); err != nil || out != in {
		t.Errorf("round trip: %+v %v", out, err)
	}
	for _, bad := range []string{`{}`, `{"chassisID":"a","nodeIP":"172.18.0.1","gatewayMAC":"0a:58:ac:12:00:01"}`,
		`{"chassisID":"a","nodeIP":"172.18.0.1/24","gatewayMAC":"x"}`, `[`} {
		if _, err := ParseNodeChassis(bad); err == nil || !strings.Contains(err.Error(), NodeChassisKey) {
			t.Errorf("%s: got %v", bad, err)
		}
	}
	if p, err := ParseNodeSubnet("10.244.3.0/24"); err != nil || p.String() != "10.244.3.0/24" {
		t.Errorf("subnet: %v %v", p, err)
	}
	for _, bad := range []string{"10.244.3.1/24", "10.244.3.0", ""} {
		if _, err := ParseNodeSubnet(bad); err == nil {
			t.Errorf("subnet %q accepted", bad)
		}
	}
}

func TestMACFromIP(t *testing.T) {
	if got := MACFromIP(netip.MustParseAddr("10.244.1.5")).String(); got != "0a:58:0a:f4:01:05" {
		t.Errorf("got %s", got)
	}
}
