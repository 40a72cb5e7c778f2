package contract

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

const prefix = "k8s.ovn-transparent.io/"

const (
	// NodeSubnetKey is written by the master on a Node: the node's pod subnet, e.g.
	// "10.244.1.0/24". It stays the same across master restarts and node re-joins.
	NodeSubnetKey = prefix + "node-subnet"
	// NodeChassisKey is written by the node agent on its Node: what the master needs to build the
	// node's gateway router (NodeChassisInfo as JSON).
	NodeChassisKey = prefix + "node-chassis"
	// PodNetworkKey is written by the master on a Pod: the addresses the node agent gives the pod
	// (PodNetworkInfo as JSON).
	PodNetworkKey = prefix + "pod-network"
)

// NodeChassisInfo is the value of NodeChassisKey.
type NodeChassisInfo struct {
	// ChassisID is the node's OVN system-id (Open_vSwitch external_ids:system-id).
	ChassisID string `json:"chassisID"`
	// NodeIP is the node's address with its prefix on the physical network, e.g.
	// "172.18.0.1/24"; the gateway router's external port uses it.
	NodeIP string `json:"nodeIP"`
	// GatewayMAC is the MAC of the gateway bridge, shared by the gateway router's external port.
	GatewayMAC string `json:"gatewayMAC"`
	// NextHop is the physical network's default gateway, if any.
	NextHop string `json:"nextHop,omitempty"`
	// OS is the node's operating system ("linux" or "windows").
	OS string `json:"os,omitempty"`
}

// Validate checks every field.
func (n NodeChassisInfo) Validate() error {
	if n.ChassisID == "" {
		return fmt.Errorf("%s: chassisID is empty", NodeChassisKey)
	}
	if _, err := netip.ParsePrefix(n.NodeIP); err != nil {
		return fmt.Errorf("%s: nodeIP %q: %w", NodeChassisKey, n.NodeIP, err)
	}
	if _, err := net.ParseMAC(n.GatewayMAC); err != nil {
		return fmt.Errorf("%s: gatewayMAC %q: %w", NodeChassisKey, n.GatewayMAC, err)
	}
	if n.NextHop != "" {
		if _, err := netip.ParseAddr(n.NextHop); err != nil {
			return fmt.Errorf("%s: nextHop %q: %w", NodeChassisKey, n.NextHop, err)
		}
	}
	return nil
}

// ParseNodeChassis parses and validates a NodeChassisKey value.
func ParseNodeChassis(s string) (NodeChassisInfo, error) {
	var n NodeChassisInfo
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return NodeChassisInfo{}, fmt.Errorf("%s: %w", NodeChassisKey, err)
	}
	if err := n.Validate(); err != nil {
		return NodeChassisInfo{}, err
	}
	return n, nil
}

// ParseNodeSubnet parses a NodeSubnetKey value; the prefix must be in canonical form.
func ParseNodeSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s: %w", NodeSubnetKey, err)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%s: %q has host bits set", NodeSubnetKey, s)
	}
	return p, nil
}

// Route is one route the pod gets besides its subnet's.
type Route struct {
	Dest    string `json:"dest"`    // a prefix, e.g. "10.96.0.0/16"
	NextHop string `json:"nextHop"` // an address on the pod's subnet
}

// PodNetworkInfo is the value of PodNetworkKey.
type PodNetworkInfo struct {
	// IPAddresses are the pod's addresses with the subnet's prefix length, e.g. "10.244.1.5/24".
	IPAddresses []string `json:"ipAddresses"`
	// MACAddress is the pod interface's MAC.
	MACAddress string `json:"macAddress"`
	// GatewayIPs are the default gateways, one per address family.
	GatewayIPs []string `json:"gatewayIPs"`
	// Routes are extra routes (the gateway is the default route already).
	Routes []Route `json:"routes,omitempty"`
}

// PodNetwork is PodNetworkInfo parsed.
type PodNetwork struct {
	IPs      []netip.Prefix
	MAC      net.HardwareAddr
	Gateways []netip.Addr
	Routes   []ParsedRoute
}

// ParsedRoute is a Route parsed.
type ParsedRoute struct {
	Dest    netip.Prefix
	NextHop netip.Addr
}

// ParsePodNetwork parses and validates a PodNetworkKey value: at least one address, a unicast
// MAC, one gateway inside each address's subnet, routes whose next hop is on a pod subnet.
func ParsePodNetwork(s string) (PodNetwork, error) {
	var info PodNetworkInfo
	if err := json.Unmarshal([]byte(s), &info); err != nil {
		return PodNetwork{}, fmt.Errorf("%s: %w", PodNetworkKey, err)
	}
	return info.Parse()
}

// Parse validates info and returns it parsed.
func (info PodNetworkInfo) Parse() (PodNetwork, error) {
	var pn PodNetwork
	bad := func(format string, args ...any) (PodNetwork, error) {
		return PodNetwork{}, fmt.Errorf("%s: "+format, append([]any{PodNetworkKey}, args...)...)
	}
	if len(info.IPAddresses) == 0 {
		return bad("no ipAddresses")
	}
	for _, s := range info.IPAddresses {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return bad("ipAddresses: %v", err)
		}
		pn.IPs = append(pn.IPs, p)
	}
	mac, err := net.ParseMAC(info.MACAddress)
	if err != nil {
		return bad("macAddress: %v", err)
	}
	if len(mac) != 6 || mac[0]&1 == 1 {
		return bad("macAddress %s is not a unicast Ethernet address", mac)
	}
	pn.MAC = mac
	for _, s := range info.GatewayIPs {
		gw, err := netip.ParseAddr(s)
		if err != nil {
			return bad("gatewayIPs: %v", err)
		}
		if !onSubnet(pn.IPs, gw) {
			return bad("gateway %s is on none of the pod's subnets %v", gw, info.IPAddresses)
		}
		pn.Gateways = append(pn.Gateways, gw)
	}
	if len(pn.Gateways) == 0 {
		return bad("no gatewayIPs")
	}
	for _, r := range info.Routes {
		dst, err := netip.ParsePrefix(r.Dest)
		if err != nil {
			return bad("route dest: %v", err)
		}
		nh, err := netip.ParseAddr(r.NextHop)
		if err != nil {
			return bad("route nextHop: %v", err)
		}
		if !onSubnet(pn.IPs, nh) {
			return bad("route to %s: next hop %s is on none of the pod's subnets", dst, nh)
		}
		pn.Routes = append(pn.Routes, ParsedRoute{Dest: dst.Masked(), NextHop: nh})
	}
	return pn, nil
}

func onSubnet(ips []netip.Prefix, a netip.Addr) bool {
	for _, p := range ips {
		if p.Masked().Contains(a) && a != p.Addr() {
			return true
		}
	}
	return false
}

// Marshal returns the annotation value of info.
func (info PodNetworkInfo) Marshal() (string, error) {
	if _, err := info.Parse(); err != nil {
		return "", err
	}
	b, err := json.Marshal(info)
	return string(b), err
}

// Marshal returns the annotation value of n.
func (n NodeChassisInfo) Marshal() (string, error) {
	if err := n.Validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(n)
	return string(b), err
}

// PodUIDKey is the external_ids key of a pod's logical switch port that holds the pod's UID.
// Written by the master; with the port's addresses it is the master's record of which pod
// holds which address, the record a restarted master trusts over any annotation (a user may
// write a pod's annotations, never the NB). A pod deleted and created again under the same
// name is a different pod.
const PodUIDKey = prefix + "pod-uid"
