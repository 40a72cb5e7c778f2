// Package gateway keeps the OpenFlow rules of the node's gateway bridge (br-phy) in place.
// The bridge holds the uplink and the host's interface on the physical network (the
// bridge's LOCAL port on Linux, the host vNIC's internal port on Windows: Ports.Host); the
// gateway router's external port, reached through the patch port ovn-controller makes for
// the node's localnet port (contract.LocalnetPort), has the same IP and MAC. The rules
// decide which of the two a frame from the physical network is for (README.md).
//
// Flows is a pure function of the bridge's port numbers and the node's address; Controller
// watches the Open_vSwitch cache for those port numbers and syncs the flows through
// internal/openflow. Nothing here is specific to an operating system.
package gateway

import (
	"net"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
)

// Cookie marks the flows the node agent owns on the gateway bridge: "ovnt" and 1. Flows
// with another cookie (an operator's) are left alone by Sync.
const Cookie uint64 = 0x6f76_6e74_0001

const (
	// ctZone is the conntrack zone of the bridge's rules. ovn-controller numbers the zones
	// of br-int's ports and datapaths upwards from 1, in the same datapath conntrack, so a
	// number near the top of the range stays clear of them.
	ctZone = 64000
	// ct_mark of a connection committed in ctZone: who opened it, so its replies go back
	// to the same side.
	markOVN  = 1 // the gateway router (pod egress SNATed to the node IP)
	markHost = 2 // the host itself

	// tableReply is where IP from the physical network continues once conntrack has looked
	// it up.
	tableReply = 1
)

// Tunnel is the transport of the overlay's encapsulation: these packets belong to the host
// (its kernel or OVS terminates the tunnel) and must never meet the zone's conntrack.
type Tunnel struct {
	Protocol uint8 // openflow.IPProtoUDP or IPProtoTCP
	Port     uint16
}

// TunnelFor returns the transport of an ovn-encap-type: GENEVE is UDP 6081, STT looks like
// TCP to 7471. Any other type has none (the zero Tunnel: no tunnel rules).
func TunnelFor(encapType string) Tunnel {
	switch encapType {
	case "geneve":
		return Tunnel{openflow.IPProtoUDP, 6081}
	case "stt":
		return Tunnel{openflow.IPProtoTCP, 7471}
	}
	return Tunnel{}
}

// Ports are the OpenFlow port numbers of the gateway bridge's ports.
type Ports struct {
	Uplink uint32 // the physical interface
	// Patch is the patch port to br-int that ovn-controller creates for the node's localnet
	// port; 0 while there is none (the master has not created the gateway router yet, or
	// ovn-controller has not caught up).
	Patch uint32
	// Host is the host's interface on the physical network, the one holding the node's
	// IP and MAC: openflow.PortLocal where that is the bridge's own interface (Linux), the
	// number of the host vNIC's internal port on Windows, where the address stays on the
	// vNIC. 0 means PortLocal.
	Host uint32
}

// host is p.Host with 0 read as PortLocal.
func (p Ports) host() uint32 {
	if p.Host == 0 {
		return openflow.PortLocal
	}
	return p.Host
}

// NodePort is a Service's entry point on this node: what arrives from the physical network
// for IP:Port belongs to the gateway router's load balancers, not to the host. IP is the zero
// Addr for a NodePort (the node's own IP), or a Service's externalIP or LoadBalancer ingress
// IP routed to this node.
type NodePort struct {
	Protocol uint8 // openflow.IPProtoTCP, IPProtoUDP or IPProtoSCTP
	Port     uint16
	IP       netip.Addr // zero: the node IP
}

// Compare orders node ports by protocol, port and IP (for stable flow sets).
func (a NodePort) Compare(b NodePort) int {
	if c := int(a.Protocol) - int(b.Protocol); c != 0 {
		return c
	}
	if c := int(a.Port) - int(b.Port); c != 0 {
		return c
	}
	return a.IP.Compare(b.IP)
}

// Params are everything the bridge's flows depend on.
type Params struct {
	Ports
	// MAC and IP are the node's address on the physical network, held by the host port
	// (Ports.Host) and shared by the gateway router's external port.
	MAC    net.HardwareAddr
	IP     netip.Addr
	Tunnel Tunnel
	// NodePorts are sent to the gateway router (ignored while there is no patch port; the
	// node's own IP when IP is not IPv4, and entries with an IP that is not IPv4).
	NodePorts []NodePort
}

// Flows returns the gateway bridge's rules (README.md has them as a table). Without a patch
// port they are the host's part alone: the same conntrack commits and lookups, so a
// connection the host opens before the gateway router appears keeps its replies after.
func Flows(p Params) []openflow.Flow {
	var (
		up, patch = p.Uplink, p.Patch
		host      = p.host()
		normal    = openflow.PortNormal
		ip        = openflow.EthTypeIPv4
	)
	out := func(ports ...uint32) []openflow.Action {
		as := make([]openflow.Action, len(ports))
		for i, port := range ports {
			as[i] = openflow.Output{Port: port}
		}
		return as
	}
	commit := func(mark uint32, port uint32) []openflow.Action {
		return []openflow.Action{
			openflow.CT{Commit: true, Zone: ctZone, Exec: []openflow.Action{openflow.SetCTMark{Mark: mark}}},
			openflow.Output{Port: port},
		}
	}
	// replyTo matches a reply (or an ICMP error about it) of a connection committed with mark.
	replyTo := func(state, mark uint32) openflow.Match {
		return openflow.Match{EthType: ip, CTState: openflow.CTTrk | state, CTStateMask: openflow.CTTrk | state,
			CTMark: mark, CTMarkMask: ^uint32(0)}
	}
	var flows []openflow.Flow
	add := func(table uint8, prio uint16, m openflow.Match, actions []openflow.Action) {
		flows = append(flows, openflow.Flow{Table: table, Priority: prio, Match: m, Actions: actions})
	}

	if t := p.Tunnel; t.Port != 0 {
		tunnel := func(m openflow.Match) openflow.Match {
			m.EthType, m.IPProto, m.TPDst = ip, t.Protocol, t.Port
			return m
		}
		// Tunnel packets are the host's, and the bulk of the traffic: they go past the
		// zone, which is for the connections whose owner must be told apart (and would
		// judge STT's TCP-looking segments as a TCP stream).
		add(0, 205, tunnel(openflow.Match{InPort: up, EthDst: p.MAC}), out(host))
		add(0, 200, tunnel(openflow.Match{InPort: up}), out(normal))
		add(0, 200, tunnel(openflow.Match{InPort: host}), out(up))
	}
	if patch != 0 {
		flows = append(flows, nodePortFlows(p)...)
		// The gateway router speaks only with the shared MAC; IP it sends is committed as
		// OVN's, so the replies find their way back through the patch port.
		add(0, 100, openflow.Match{InPort: patch, EthSrc: p.MAC, EthType: ip}, commit(markOVN, up))
	}
	add(0, 100, openflow.Match{InPort: host, EthType: ip}, commit(markHost, up))
	add(0, 50, openflow.Match{InPort: up, EthType: ip}, []openflow.Action{openflow.CT{Zone: ctZone, Recirc: true, Table: tableReply}})
	if patch != 0 {
		// Not IP (ARP, above all) to the shared MAC: both owners of the MAC get a copy.
		add(0, 10, openflow.Match{InPort: up, EthDst: p.MAC}, out(patch, host))
		add(0, 10, openflow.Match{InPort: patch, EthSrc: p.MAC}, out(normal))
		// Anything else from OVN (another MAC on the localnet) has no business outside.
		add(0, 9, openflow.Match{InPort: patch}, nil)
	} else {
		add(0, 10, openflow.Match{InPort: up, EthDst: p.MAC}, out(host))
	}
	add(0, 0, openflow.Match{}, out(normal))

	if patch != 0 {
		add(tableReply, 100, replyTo(openflow.CTEst, markOVN), out(patch))
		add(tableReply, 100, replyTo(openflow.CTRel, markOVN), out(patch))
	}
	add(tableReply, 100, replyTo(openflow.CTEst, markHost), out(host))
	add(tableReply, 100, replyTo(openflow.CTRel, markHost), out(host))
	// A new connection to the node IP (SSH to the node, the kubelet's port): the host's.
	add(tableReply, 10, openflow.Match{EthDst: p.MAC}, out(host))
	add(tableReply, 0, openflow.Match{}, out(normal))
	return flows
}

// nodePortFlows is the hook of Services: a NodePort's (or an externalIP's, or a LoadBalancer
// ingress IP's) packets from the physical network go to the gateway router, and its answers
// from the router go out untouched by conntrack (the router's own conntrack holds the load
// balancer's state). Priority 110 puts them above the zone's commits and lookups. Packets
// for an externalIP come to the node's MAC: the network routes that IP via the node IP.
//
// A NodePort on the node IP is rewritten to contract.NodePortGatewayIP, the address the
// gateway routers' load balancers have for NodePorts, on its way to the patch port, and
// back on the answers. The node IP itself is the GR's SNAT address, and OVN 23.03 (template
// VIPs) then unSNATs a NodePort's first packet and misses its force_snat (README.md).
func nodePortFlows(p Params) []openflow.Flow {
	var flows []openflow.Flow
	for _, np := range p.NodePorts {
		ip := np.IP
		if !ip.IsValid() {
			ip = p.IP
		}
		if !ip.Is4() {
			continue // the rules match IPv4 only
		}
		// gr is the address the GR knows the entry point by.
		gr, in, back := ip, []openflow.Action{openflow.Output{Port: p.Patch}}, []openflow.Action{openflow.Output{Port: p.Uplink}}
		if !np.IP.IsValid() {
			gr = contract.NodePortGatewayIP
			in = append([]openflow.Action{openflow.SetIPv4Dst{IP: gr}}, in...)
			back = append([]openflow.Action{openflow.SetIPv4Src{IP: ip}}, back...)
		}
		flows = append(flows,
			openflow.Flow{Priority: 110,
				Match: openflow.Match{InPort: p.Uplink, EthDst: p.MAC, EthType: openflow.EthTypeIPv4,
					IPProto: np.Protocol, IPv4Dst: netip.PrefixFrom(ip, 32), TPDst: np.Port},
				Actions: in},
			openflow.Flow{Priority: 110,
				Match: openflow.Match{InPort: p.Patch, EthSrc: p.MAC, EthType: openflow.EthTypeIPv4,
					IPProto: np.Protocol, IPv4Src: netip.PrefixFrom(gr, 32), TPSrc: np.Port},
				Actions: back})
	}
	return flows
}
