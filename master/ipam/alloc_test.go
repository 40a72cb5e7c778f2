package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSubnetsAllocateLowestFirstAndExhaust(t *testing.T) {
	s, err := NewSubnets(mustPrefix(t, "10.244.0.0/23"), 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ owner, want string }{
		{"node1", "10.244.0.0/24"},
		{"node2", "10.244.1.0/24"},
		{"node1", "10.244.0.0/24"}, // idempotent
	} {
		got, err := s.Allocate(tc.owner)
		if err != nil || got.String() != tc.want {
			t.Errorf("Allocate(%s) = %v, %v; want %s", tc.owner, got, err, tc.want)
		}
	}
	_, err = s.Allocate("node3")
	var ex *ExhaustedError
	if !errors.As(err, &ex) || !errors.Is(err, ErrExhausted) {
		t.Fatalf("third node: got %v, want an *ExhaustedError", err)
	}
	if freed, ok := s.Release("node1"); !ok || freed.String() != "10.244.0.0/24" {
		t.Errorf("Release(node1) = %v, %v", freed, ok)
	}
	if got, err := s.Allocate("node3"); err != nil || got.String() != "10.244.0.0/24" {
		t.Errorf("after a release: Allocate(node3) = %v, %v; want the freed 10.244.0.0/24", got, err)
	}
}

func TestSubnetsReserve(t *testing.T) {
	s, err := NewSubnets(mustPrefix(t, "10.244.0.0/16"), 24)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("node1", mustPrefix(t, "10.244.7.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("node1", mustPrefix(t, "10.244.7.0/24")); err != nil {
		t.Errorf("reserving again must be idempotent: %v", err)
	}
	for _, tc := range []struct {
		owner, p string
		want     error
	}{
		{"node2", "10.244.7.0/24", ErrConflict},   // someone else's
		{"node1", "10.244.8.0/24", ErrConflict},   // node1 holds another
		{"node2", "10.245.0.0/24", ErrOutOfRange}, // outside the cluster CIDR
		{"node2", "10.244.8.0/25", ErrOutOfRange}, // wrong size
	} {
		if err := s.Reserve(tc.owner, mustPrefix(t, tc.p)); !errors.Is(err, tc.want) {
			t.Errorf("Reserve(%s, %s) = %v, want %v", tc.owner, tc.p, err, tc.want)
		}
	}
	// Allocation skips what was reserved.
	for i := range 7 {
		p, err := s.Allocate(fmt.Sprint("n", i))
		if err != nil || p.String() == "10.244.7.0/24" {
			t.Fatalf("Allocate = %v, %v", p, err)
		}
	}
	if p, _ := s.Allocate("n7"); p.String() != "10.244.8.0/24" {
		t.Errorf("the 8th allocation got %s, want 10.244.8.0/24 (10.244.7.0/24 is reserved)", p)
	}
}

func TestNewSubnetsRejects(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		bits int
	}{
		{"10.244.0.0/24", 24}, {"10.244.0.0/24", 30}, {"fd00::/48", 64}, {"10.244.0.1/16", 24},
	} {
		if _, err := NewSubnets(mustPrefix(t, tc.cidr), tc.bits); err == nil {
			t.Errorf("NewSubnets(%s, /%d) accepted", tc.cidr, tc.bits)
		}
	}
}

func TestPodAddressesSkipInfrastructure(t *testing.T) {
	a, err := NewPodAddresses(mustPrefix(t, "10.244.1.0/29")) // .0 net, .1 router, .2 mgmt, .7 broadcast
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 4 {
		ip, err := a.Allocate(fmt.Sprint("pod", i))
		if err != nil {
			t.Fatalf("pod%d: %v", i, err)
		}
		got = append(got, ip.String())
	}
	if fmt.Sprint(got) != "[10.244.1.3 10.244.1.4 10.244.1.5 10.244.1.6]" {
		t.Errorf("allocated %v", got)
	}
	if _, err := a.Allocate("pod4"); !errors.Is(err, ErrExhausted) {
		t.Errorf("fifth pod on a /29: %v, want exhaustion", err)
	}
	for _, ip := range []string{"10.244.1.0", "10.244.1.1", "10.244.1.2", "10.244.1.7", "10.244.2.3"} {
		if err := a.Reserve("x", netip.MustParseAddr(ip)); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Reserve(%s) = %v, want out of range", ip, err)
		}
	}
	if ip, ok := a.Release("pod1"); !ok || ip.String() != "10.244.1.4" {
		t.Errorf("Release(pod1) = %v, %v", ip, ok)
	}
	if ip, _ := a.Allocate("pod5"); ip.String() != "10.244.1.4" {
		t.Errorf("freed address not reused: got %s", ip)
	}
}

func TestJoinAddresses(t *testing.T) {
	a, err := NewJoinAddresses(mustPrefix(t, "100.64.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Reserved(1).String() != "100.64.0.1" {
		t.Errorf("cluster router join IP %s", a.Reserved(1))
	}
	if ip, _ := a.Allocate("node1"); ip.String() != "100.64.0.2" {
		t.Errorf("first GR got %s, want 100.64.0.2", ip)
	}
	if err := a.Reserve("node2", netip.MustParseAddr("100.64.0.1")); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("the cluster router's address was given to a GR: %v", err)
	}
}
