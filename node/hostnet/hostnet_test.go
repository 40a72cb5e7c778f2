package hostnet

import (
	"strings"
	"testing"
)

func TestHostIfName(t *testing.T) {
	long := strings.Repeat("f", 64)
	a, b := HostIfName(long, "eth0"), HostIfName(long, "net1")
	if len(a) > 15 || !strings.HasPrefix(a, "ovt") {
		t.Errorf("%q: want at most 15 characters starting with ovt", a)
	}
	if a == b || a != HostIfName(long, "eth0") {
		t.Errorf("names must be stable and differ per interface: %q %q", a, b)
	}
	// Container IDs that share a prefix (as test runtimes make them) must not collide.
	if HostIfName("container-1", "eth0") == HostIfName("container-2", "eth0") {
		t.Error("collision on a shared prefix")
	}
}
