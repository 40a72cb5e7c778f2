package contract

import "net/netip"

// PhysicalNetwork is the network name of every node's localnet port (on ext_<node>): the
// master writes it into the port's options:network_name, and the node agent maps it to its
// gateway bridge with ovn-bridge-mappings=physnet:<bridge>. It is not configurable: a
// different value on one side silently cuts north-south traffic.
const PhysicalNetwork = "physnet"

// NodePortGatewayIP is the address at which every gateway router serves NodePorts: the
// master's load balancers use it as their VIP on GR_<node>, and the node's gateway bridge
// rewrites the node IP to and from it. Link-local, never on a wire, the same on every node.
var NodePortGatewayIP = netip.MustParseAddr("169.254.100.1")
