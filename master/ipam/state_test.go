package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func newState(t *testing.T, cluster string, bits int) *State {
	t.Helper()
	s, err := NewState(netip.MustParsePrefix(cluster), bits, netip.MustParsePrefix("100.64.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStateRebuild plays a master restart: a new State is filled from the annotations the
// old one wrote, in any order, and then allocates nothing twice.
func TestStateRebuild(t *testing.T) {
	old := newState(t, "10.244.0.0/16", 24)
	n1, _ := old.AllocateNodeSubnet("node1")
	n2, _ := old.AllocateNodeSubnet("node2")
	a, _ := old.AllocatePodIP("node1", "ns/a")
	b, _ := old.AllocatePodIP("node1", "ns/b")
	c, _ := old.AllocatePodIP("node2", "ns/c")
	old.ReleasePod("ns/a") // a finished: its address is free again, and stays free after the restart

	s := newState(t, "10.244.0.0/16", 24)
	for node, p := range map[string]netip.Prefix{"node2": n2, "node1": n1} {
		if err := s.ReserveNodeSubnet(node, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		node, pod string
		ip        netip.Addr
	}{{"node2", "ns/c", c}, {"node1", "ns/b", b}} {
		if err := s.ReservePodIP(r.node, r.pod, r.ip); err != nil {
			t.Fatal(err)
		}
	}
	n3, err := s.AllocateNodeSubnet("node3")
	if err != nil || n3 == n1 || n3 == n2 {
		t.Errorf("node3 got %v, %v; node1 and node2 hold %s and %s", n3, err, n1, n2)
	}
	d, err := s.AllocatePodIP("node1", "ns/d")
	if err != nil || d == b {
		t.Errorf("ns/d got %v, %v; ns/b holds %s", d, err, b)
	}
	if d != a {
		t.Errorf("ns/d got %s, want the lowest free address %s (a's, released)", d, a)
	}
	if err := s.ReservePodIP("node1", "ns/e", b); !errors.Is(err, ErrConflict) {
		t.Errorf("a second pod claiming %s: %v, want a conflict", b, err)
	}
}

func TestStatePodMoves(t *testing.T) {
	s := newState(t, "10.244.0.0/16", 24)
	s.AllocateNodeSubnet("node1")
	s.AllocateNodeSubnet("node2")
	ip1, _ := s.AllocatePodIP("node1", "ns/p")
	// The pod is deleted and created again under the same name on node2.
	ip2, err := s.AllocatePodIP("node2", "ns/p")
	if err != nil || !netip.MustParsePrefix("10.244.1.0/24").Contains(ip2) {
		t.Fatalf("on node2: %v, %v", ip2, err)
	}
	if s.PodCount("node1") != 0 {
		t.Errorf("%s still held on node1", ip1)
	}
	// An annotation naming another free address moves the pod there; a taken one changes nothing.
	other, _ := s.AllocatePodIP("node2", "ns/q")
	if err := s.ReservePodIP("node2", "ns/p", other); !errors.Is(err, ErrConflict) {
		t.Errorf("got %v, want a conflict", err)
	}
	if _, ip, _ := s.PodIP("ns/p"); ip != ip2 {
		t.Errorf("a failed reservation changed the pod's address to %s", ip)
	}
	free := netip.MustParseAddr("10.244.1.100")
	if err := s.ReservePodIP("node2", "ns/p", free); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.AllocatePodIP("node2", "ns/r"); again != ip2 {
		t.Errorf("the pod's old address %s was not freed (next allocation %s)", ip2, again)
	}
}

func TestStateReleaseNode(t *testing.T) {
	s := newState(t, "10.244.0.0/23", 24)
	s.AllocateNodeSubnet("node1")
	s.AllocateNodeSubnet("node2")
	if _, err := s.AllocateNodeSubnet("node3"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("node3: %v, want exhaustion", err)
	}
	s.AllocatePodIP("node1", "ns/a")
	j1, _ := s.AllocateJoinIP("node1")
	if _, ok := s.ReleaseNode("node1"); !ok {
		t.Fatal("node1 had no subnet")
	}
	if _, _, ok := s.PodIP("ns/a"); ok {
		t.Error("a pod of the deleted node kept its address")
	}
	if _, err := s.AllocatePodIP("node1", "ns/a"); !errors.Is(err, ErrNoNodeSubnet) {
		t.Errorf("allocating on a deleted node: %v", err)
	}
	if p, err := s.AllocateNodeSubnet("node3"); err != nil || p.String() != "10.244.0.0/24" {
		t.Errorf("node3 after node1 left: %v, %v", p, err)
	}
	if j, _ := s.AllocateJoinIP("node3"); j != j1 {
		t.Errorf("join address %s not freed (node3 got %s)", j1, j)
	}
}

func TestUsage(t *testing.T) {
	s, err := NewState(netip.MustParsePrefix("10.244.0.0/16"), 24, netip.MustParsePrefix("100.64.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocateNodeSubnet("n1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/x", "a/y"} {
		if _, err := s.AllocatePodIP("n1", p); err != nil {
			t.Fatal(err)
		}
	}
	// A /24 gives .3 to .254 to pods: 252 addresses.
	if got := s.PodAddressUsage(); len(got) != 1 || got["n1"] != (Usage{Used: 2, Free: 250}) {
		t.Errorf("pod address usage %+v", got)
	}
	if got := s.SubnetUsage(); got != (Usage{Used: 1, Free: 255}) {
		t.Errorf("subnet usage %+v", got)
	}
}
