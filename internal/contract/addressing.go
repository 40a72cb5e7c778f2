package contract

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// The addresses of a node subnet that are not pods'. The master writes them into the NB (the
// cluster router's port on the node switch, the management port's logical port, the pods'
// gateway in their pod-network annotation, the NetworkPolicy match of the management ports);
// the node agent puts the same pair on the management port's interface and routes the
// cluster and service ranges through the router address. Pod addresses start after them.
const (
	routerHost     = 1 // RouterIP
	managementHost = 2 // ManagementIP
)

// RouterIP is the cluster router's address on IPv4 node subnet subnet, its first host
// address (.1 of a /24): the pods' default gateway and the management port's next hop.
func RouterIP(subnet netip.Prefix) netip.Addr { return nth(subnet, routerHost) }

// ManagementIP is the management port's address on IPv4 node subnet subnet, its second host
// address (.2 of a /24).
func ManagementIP(subnet netip.Prefix) netip.Addr { return nth(subnet, managementHost) }

// ManagementAddresses is the management port address of every node subnet of length
// nodeBits in IPv4 prefix cluster as one address and mask, for an OVN match such as
// "ip4.src == addr/mask": the mask keeps the cluster's bits and the host bits and leaves
// the bits that tell the node subnets apart free, so one match stands for every node,
// present and future.
func ManagementAddresses(cluster netip.Prefix, nodeBits int) (addr, mask netip.Addr) {
	first := netip.PrefixFrom(cluster.Masked().Addr(), nodeBits)
	m := prefixMask(cluster.Bits()) | ^prefixMask(nodeBits)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], m)
	return ManagementIP(first), netip.AddrFrom4(b)
}

// prefixMask is the IPv4 netmask of a prefix of bits bits.
func prefixMask(bits int) uint32 { return ^uint32(0) << (32 - bits) }

// nth returns the n-th address of IPv4 prefix p (0 is the network address).
func nth(p netip.Prefix, n uint32) netip.Addr {
	b := p.Masked().Addr().As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(b[:])+n)
	return netip.AddrFrom4(out)
}

// MACFromIP derives the MAC the project gives an interface with IPv4 address ip:
// 0a:58 followed by the four address bytes. Locally administered, unicast, and stable, so a
// pod or port that gets the same IP again gets the same MAC and neighbours' caches stay right.
// The master writes it on logical ports and router ports; the node agent gives the
// management port's interface the MAC of ManagementIP, which must be the logical port's.
func MACFromIP(ip netip.Addr) net.HardwareAddr {
	b := ip.As16()
	return net.HardwareAddr{0x0a, 0x58, b[12], b[13], b[14], b[15]}
}
