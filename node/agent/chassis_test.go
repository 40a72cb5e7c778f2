package agent

import (
	"net/netip"
	"testing"
)

func TestBridgeRemote(t *testing.T) {
	node := netip.MustParseAddr("10.0.0.5")
	for listen, want := range map[string]string{
		"pssl:6653":           "ssl:10.0.0.5:6653",
		"pssl:6653:192.0.2.7": "ssl:192.0.2.7:6653",
		"ptcp:6653":           "tcp:10.0.0.5:6653",
		"pssl:6653:fd00::5":   "ssl:[fd00::5]:6653",
	} {
		if got := bridgeRemote(listen, node); got != want {
			t.Errorf("bridgeRemote(%q) = %q, want %q", listen, got, want)
		}
	}
}
