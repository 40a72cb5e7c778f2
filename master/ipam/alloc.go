// Package ipam allocates what the master hands out: node subnets from the cluster CIDR, pod
// addresses from a node subnet, and gateway-router addresses from the join subnet. Everything
// is IPv4 and lives in memory; the durable record is elsewhere (Node and Pod annotations, NB
// rows), and the master rebuilds these allocators from it at start, before allocating anything.
//
// Allocators are pure data structures, not safe for concurrent use; State wraps them for the
// controllers.
package ipam

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

func u32(a netip.Addr) uint64 { b := a.As4(); return uint64(binary.BigEndian.Uint32(b[:])) }

func addr(v uint64) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v))
	return netip.AddrFrom4(b)
}

func checkIPv4(p netip.Prefix, what string) error {
	if !p.IsValid() || !p.Addr().Is4() || p.Masked() != p {
		return fmt.Errorf("ipam: %s %s: want a canonical IPv4 prefix", what, p)
	}
	return nil
}

// Subnets allocates node subnets of one size from the cluster CIDR.
type Subnets struct {
	cluster netip.Prefix
	bits    int
	p       *pool
}

// NewSubnets splits cluster into subnets of prefix length bits. bits must leave room for the
// four addresses a node subnet reserves and at least one pod.
func NewSubnets(cluster netip.Prefix, bits int) (*Subnets, error) {
	if err := checkIPv4(cluster, "cluster CIDR"); err != nil {
		return nil, err
	}
	if bits <= cluster.Bits() || bits > 29 {
		return nil, fmt.Errorf("ipam: node subnet /%d: must be longer than the cluster CIDR %s and at most /29", bits, cluster)
	}
	n := uint64(1) << (bits - cluster.Bits())
	return &Subnets{cluster: cluster, bits: bits, p: newPool(0, n-1)}, nil
}

func (s *Subnets) prefix(i uint64) netip.Prefix {
	return netip.PrefixFrom(addr(u32(s.cluster.Addr())+i<<(32-s.bits)), s.bits)
}

func (s *Subnets) index(p netip.Prefix) (uint64, error) {
	if !p.Addr().Is4() || p.Bits() != s.bits || p.Masked() != p || !s.cluster.Contains(p.Addr()) {
		return 0, &OutOfRangeError{What: p.String(), Pool: s.cluster.String(),
			Why: fmt.Sprintf("node subnets are the /%d prefixes of the cluster CIDR", s.bits)}
	}
	return (u32(p.Addr()) - u32(s.cluster.Addr())) >> (32 - s.bits), nil
}

// Get returns owner's subnet.
func (s *Subnets) Get(owner string) (netip.Prefix, bool) {
	i, ok := s.p.get(owner)
	if !ok {
		return netip.Prefix{}, false
	}
	return s.prefix(i), true
}

// Reserve gives p to owner. Idempotent. Fails with *OutOfRangeError if p is not one of the
// pool's subnets and *ConflictError if another owner holds p or owner holds another subnet.
func (s *Subnets) Reserve(owner string, p netip.Prefix) error {
	i, err := s.index(p)
	if err != nil {
		return err
	}
	if holder, held, ok := s.p.reserve(owner, i); !ok {
		return &ConflictError{What: p.String(), Owner: owner, Holder: holder, Held: s.prefix(held).String()}
	}
	return nil
}

// Allocate returns owner's subnet, giving it the lowest free one if it has none; it fails
// with *ExhaustedError when every subnet is taken.
func (s *Subnets) Allocate(owner string) (netip.Prefix, error) {
	i, ok := s.p.allocate(owner)
	if !ok {
		return netip.Prefix{}, &ExhaustedError{Pool: fmt.Sprintf("/%d node subnet in %s", s.bits, s.cluster)}
	}
	return s.prefix(i), nil
}

// Release frees owner's subnet; it reports what was freed, if anything.
func (s *Subnets) Release(owner string) (netip.Prefix, bool) {
	i, ok := s.p.release(owner)
	if !ok {
		return netip.Prefix{}, false
	}
	return s.prefix(i), true
}

// Addresses allocates the addresses of one IPv4 subnet to owners, never the network and
// broadcast addresses nor the first `skip` host addresses, which the topology uses.
type Addresses struct {
	subnet netip.Prefix
	skip   int
	p      *pool
}

// Host addresses a node subnet keeps for the infrastructure: .1 is the cluster router's port
// rtos-<node>, .2 the node's management port k8s-<node>.
const nodeSubnetReserved = 2

// Host addresses the join subnet keeps: .1 is the cluster router's port on the join switch.
const joinSubnetReserved = 1

// NewPodAddresses returns the pod address allocator of a node subnet.
func NewPodAddresses(subnet netip.Prefix) (*Addresses, error) {
	return newAddresses(subnet, nodeSubnetReserved, "node subnet")
}

// NewJoinAddresses returns the allocator of gateway-router addresses on the join subnet.
func NewJoinAddresses(join netip.Prefix) (*Addresses, error) {
	return newAddresses(join, joinSubnetReserved, "join subnet")
}

func newAddresses(subnet netip.Prefix, skip int, what string) (*Addresses, error) {
	if err := checkIPv4(subnet, what); err != nil {
		return nil, err
	}
	size := uint64(1) << (32 - subnet.Bits())
	if size < uint64(skip)+3 {
		return nil, fmt.Errorf("ipam: %s %s is too small", what, subnet)
	}
	return &Addresses{subnet: subnet, skip: skip, p: newPool(uint64(skip)+1, size-2)}, nil
}

// Subnet is the subnet the addresses come from.
func (a *Addresses) Subnet() netip.Prefix { return a.subnet }

// Reserved returns the i-th address the subnet keeps for the infrastructure (1-based: 1 is
// the router address).
func (a *Addresses) Reserved(i int) netip.Addr { return addr(u32(a.subnet.Addr()) + uint64(i)) }

func (a *Addresses) index(ip netip.Addr) (uint64, error) {
	if !ip.Is4() || !a.subnet.Contains(ip) {
		return 0, &OutOfRangeError{What: ip.String(), Pool: a.subnet.String(), Why: "outside the subnet"}
	}
	i := u32(ip) - u32(a.subnet.Addr())
	if i < a.p.first || i > a.p.last {
		return 0, &OutOfRangeError{What: ip.String(), Pool: a.subnet.String(),
			Why: "network, broadcast or infrastructure address"}
	}
	return i, nil
}

// Get returns owner's address.
func (a *Addresses) Get(owner string) (netip.Addr, bool) {
	i, ok := a.p.get(owner)
	if !ok {
		return netip.Addr{}, false
	}
	return addr(u32(a.subnet.Addr()) + i), true
}

// Holder returns who holds ip; it fails like Reserve for an address the pool never gives.
func (a *Addresses) Holder(ip netip.Addr) (string, bool, error) {
	i, err := a.index(ip)
	if err != nil {
		return "", false, err
	}
	h, ok := a.p.holder[i]
	return h, ok, nil
}

// Reserve gives ip to owner. Idempotent. Fails with *OutOfRangeError if the pool never gives
// ip and *ConflictError if another owner holds ip or owner holds another address.
func (a *Addresses) Reserve(owner string, ip netip.Addr) error {
	i, err := a.index(ip)
	if err != nil {
		return err
	}
	if holder, held, ok := a.p.reserve(owner, i); !ok {
		return &ConflictError{What: ip.String(), Owner: owner, Holder: holder,
			Held: addr(u32(a.subnet.Addr()) + held).String()}
	}
	return nil
}

// Allocate returns owner's address, giving it the lowest free one if it has none; it fails
// with *ExhaustedError when none is free.
func (a *Addresses) Allocate(owner string) (netip.Addr, error) {
	i, ok := a.p.allocate(owner)
	if !ok {
		return netip.Addr{}, &ExhaustedError{Pool: "address in " + a.subnet.String()}
	}
	return addr(u32(a.subnet.Addr()) + i), nil
}

// Release frees owner's address; it reports what was freed, if anything.
func (a *Addresses) Release(owner string) (netip.Addr, bool) {
	i, ok := a.p.release(owner)
	if !ok {
		return netip.Addr{}, false
	}
	return addr(u32(a.subnet.Addr()) + i), true
}

// Len is the number of addresses given out.
func (a *Addresses) Len() int { return a.p.len() }

// Cap is the number of addresses the allocator gives in all.
func (a *Addresses) Cap() int { return a.p.capacity() }
