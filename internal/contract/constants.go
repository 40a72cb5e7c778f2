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

// ShortCircuitPortMin is the first of the source ports (ShortCircuitPortMin to 65535) a node
// gives its own connections to its externalTrafficPolicy=Local NodePorts. Those keep the node
// IP as their source, as the Service's policy promises, so a backend on another node answers
// the node IP; the cluster router sends pods' packets for a node's IP to these ports through
// that node's management port, where its node switch undoes the load balancer's DNAT. The
// range is outside Linux's default ephemeral ports (32768 to 60999): a host's clients get
// one only when the node rewrites them to it.
const ShortCircuitPortMin = 64512
