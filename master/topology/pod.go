package topology

import (
	"fmt"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Pod is what a pod's rows depend on.
type Pod struct {
	Namespace, Name, UID string
	Node                 string
	IP                   netip.Addr
}

// requestedChassis is the logical switch port option naming the one chassis (by name or
// hostname) that may bind the port.
const requestedChassis = "requested-chassis"

// PodKey is the owner key of a pod: "namespace/name".
func PodKey(namespace, name string) string { return namespace + "/" + name }

// PodRows returns the pod's port on its node's switch. port_security pins the MAC and IP the
// pod may send from, so a pod cannot spoof another's address; the MAC is always the one
// derived from the IP (contract.MACFromIP), whatever anyone wrote elsewhere. The port may be
// bound only on the pod's node (requested-chassis) and only to this incarnation of the pod
// (iface-id-ver, the UID the node agent writes on the interface): without them any chassis
// claiming the iface-id would get the port.
func PodRows(p Pod) ([]nb.Row, error) {
	if !p.IP.Is4() || p.Node == "" || p.UID == "" {
		return nil, fmt.Errorf("topology: pod %s/%s: incomplete %+v", p.Namespace, p.Name, p)
	}
	addr := mac(p.IP) + " " + p.IP.String()
	return []nb.Row{{
		ID: nb.NewID(nb.Pod, PodKey(p.Namespace, p.Name), nb.PodPort),
		Model: &nbdb.LogicalSwitchPort{
			Name:         contract.PodPort(p.Namespace, p.Name),
			Addresses:    []string{addr},
			PortSecurity: []string{addr},
			Options: map[string]string{
				requestedChassis:    contract.ChassisHostname(p.Node),
				contract.IfaceIDVer: p.UID,
			},
			ExternalIDs: map[string]string{contract.PodUIDKey: p.UID},
		},
		Parent: nb.NewID(nb.Node, p.Node, nb.NodeSwitch),
	}}, nil
}

// PodNetwork is the pod-network annotation of a pod with address ip on subnet: the MAC
// derived from ip and the cluster router's port as default gateway.
func PodNetwork(subnet netip.Prefix, ip netip.Addr) contract.PodNetworkInfo {
	return contract.PodNetworkInfo{
		IPAddresses: []string{netip.PrefixFrom(ip, subnet.Bits()).String()},
		MACAddress:  mac(ip),
		GatewayIPs:  []string{contract.RouterIP(subnet).String()},
	}
}
