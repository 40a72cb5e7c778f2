package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// ErrNoNodeSubnet says a pod address was asked for on a node that has no subnet (yet).
var ErrNoNodeSubnet = errors.New("ipam: node has no subnet")

// State is everything the master has handed out, safe for concurrent use: node subnets, one
// address allocator per node subnet, and the gateway routers' join addresses. Nodes and pods
// are named by their keys (node name, "namespace/name").
type State struct {
	mu      sync.Mutex
	subnets *Subnets
	join    *Addresses
	pods    map[string]*Addresses // node -> addresses of its subnet
	podNode map[string]string     // pod -> node whose subnet holds its address
}

// NewState returns an empty State.
func NewState(cluster netip.Prefix, nodeBits int, join netip.Prefix) (*State, error) {
	subnets, err := NewSubnets(cluster, nodeBits)
	if err != nil {
		return nil, err
	}
	joinAddrs, err := NewJoinAddresses(join)
	if err != nil {
		return nil, err
	}
	return &State{subnets: subnets, join: joinAddrs, pods: map[string]*Addresses{}, podNode: map[string]string{}}, nil
}

// ClusterRouterJoinIP is the cluster router's address on the join subnet.
func (s *State) ClusterRouterJoinIP() netip.Addr { return s.join.Reserved(1) }

// NodeSubnet returns node's subnet.
func (s *State) NodeSubnet(node string) (netip.Prefix, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subnets.Get(node)
}

// ReserveNodeSubnet gives p to node (see Subnets.Reserve).
func (s *State) ReserveNodeSubnet(node string, p netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.subnets.Reserve(node, p); err != nil {
		return err
	}
	return s.addPodPool(node, p)
}

// AllocateNodeSubnet returns node's subnet, allocating one if it has none (see
// Subnets.Allocate).
func (s *State) AllocateNodeSubnet(node string) (netip.Prefix, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.subnets.Allocate(node)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p, s.addPodPool(node, p)
}

func (s *State) addPodPool(node string, p netip.Prefix) error {
	if a, ok := s.pods[node]; ok && a.Subnet() == p {
		return nil
	}
	a, err := NewPodAddresses(p)
	if err != nil {
		s.subnets.Release(node)
		return err
	}
	s.pods[node] = a
	return nil
}

// ReleaseNode frees node's subnet, its join address, and the addresses of every pod on it.
// It returns the subnet freed, if any.
func (s *State) ReleaseNode(node string) (netip.Prefix, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pod, n := range s.podNode {
		if n == node {
			delete(s.podNode, pod)
		}
	}
	delete(s.pods, node)
	s.join.Release(node)
	return s.subnets.Release(node)
}

// JoinIP returns the join address of node's gateway router.
func (s *State) JoinIP(node string) (netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.join.Get(node)
}

// ReserveJoinIP gives ip to node's gateway router (see Addresses.Reserve).
func (s *State) ReserveJoinIP(node string, ip netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.join.Reserve(node, ip)
}

// AllocateJoinIP returns the join address of node's gateway router, allocating one if needed.
func (s *State) AllocateJoinIP(node string) (netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.join.Allocate(node)
}

// PodIP returns pod's address and the node whose subnet it is from.
func (s *State) PodIP(pod string) (string, netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, ok := s.podNode[pod]
	if !ok {
		return "", netip.Addr{}, false
	}
	ip, ok := s.pods[node].Get(pod)
	return node, ip, ok
}

// ReservePodIP gives ip on node's subnet to pod. If pod held another address, that one is
// freed, but only once ip is known to be free: a failed reservation changes nothing.
func (s *State) ReservePodIP(node, pod string, ip netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs, ok := s.pods[node]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoNodeSubnet, node)
	}
	if s.podNode[pod] == node {
		if cur, _ := addrs.Get(pod); cur == ip {
			return nil
		}
	}
	if holder, taken, err := addrs.Holder(ip); err != nil {
		return err
	} else if taken && holder != pod {
		return &ConflictError{What: ip.String(), Owner: pod, Holder: holder}
	}
	s.releasePod(pod)
	if err := addrs.Reserve(pod, ip); err != nil {
		return err
	}
	s.podNode[pod] = node
	return nil
}

// AllocatePodIP returns pod's address on node's subnet, allocating the lowest free one if it
// has none there (an address it held on another node is freed).
func (s *State) AllocatePodIP(node, pod string) (netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs, ok := s.pods[node]
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: %s", ErrNoNodeSubnet, node)
	}
	if s.podNode[pod] != node {
		s.releasePod(pod)
	}
	ip, err := addrs.Allocate(pod)
	if err != nil {
		return netip.Addr{}, err
	}
	s.podNode[pod] = node
	return ip, nil
}

// ReleasePod frees pod's address; it returns what was freed, if anything.
func (s *State) ReleasePod(pod string) (netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releasePod(pod)
}

func (s *State) releasePod(pod string) (netip.Addr, bool) {
	node, ok := s.podNode[pod]
	if !ok {
		return netip.Addr{}, false
	}
	delete(s.podNode, pod)
	if addrs, ok := s.pods[node]; ok {
		return addrs.Release(pod)
	}
	return netip.Addr{}, false
}

// PodCount is the number of pod addresses given out on node's subnet.
func (s *State) PodCount(node string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.pods[node]; ok {
		return a.Len()
	}
	return 0
}

// Usage is how much of an address pool is given out.
type Usage struct {
	Used, Free int
}

// PodAddressUsage returns the pod address usage of every node subnet, by node.
func (s *State) PodAddressUsage() map[string]Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Usage, len(s.pods))
	for node, a := range s.pods {
		out[node] = Usage{Used: a.Len(), Free: a.Cap() - a.Len()}
	}
	return out
}

// SubnetUsage returns how many node subnets of the cluster CIDR are given out and free.
func (s *State) SubnetUsage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Used: s.subnets.p.len(), Free: s.subnets.p.capacity() - s.subnets.p.len()}
}
