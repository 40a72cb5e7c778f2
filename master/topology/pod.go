package topology

import (
	"fmt"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/annotations"
	"github.com/ovn-transparent/ovn-transparent/master/nbsync"
	"github.com/ovn-transparent/ovn-transparent/master/owner"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// PodUIDKey is the external_ids key of a pod port that holds the pod's UID: a pod deleted and
// created again under the same name is a different pod.
const PodUIDKey = "k8s.ovn-transparent.io/pod-uid"

// Pod is what a pod's rows depend on.
type Pod struct {
	Namespace, Name, UID string
	Node                 string
	IP                   netip.Addr
	MAC                  string
}

// PodKey is the owner key of a pod: "namespace/name".
func PodKey(namespace, name string) string { return namespace + "/" + name }

// PodPortName is the logical switch port of a pod, and the iface-id the node agent gives the
// pod's interface: "<namespace>_<pod>" (neither may contain "_").
func PodPortName(namespace, name string) string { return namespace + "_" + name }

// PodRows returns the pod's port on its node's switch. port_security pins the MAC and IP the
// pod may send from, so a pod cannot spoof another's address.
func PodRows(p Pod) ([]nbsync.Row, error) {
	if !p.IP.Is4() || p.MAC == "" || p.Node == "" {
		return nil, fmt.Errorf("topology: pod %s/%s: incomplete %+v", p.Namespace, p.Name, p)
	}
	addr := p.MAC + " " + p.IP.String()
	return []nbsync.Row{{
		ID: owner.NewID(owner.Pod, PodKey(p.Namespace, p.Name), owner.PodPort),
		Model: &nbdb.LogicalSwitchPort{
			Name:         PodPortName(p.Namespace, p.Name),
			Addresses:    []string{addr},
			PortSecurity: []string{addr},
			ExternalIDs:  map[string]string{PodUIDKey: p.UID},
		},
		Parent: owner.NewID(owner.Node, p.Node, owner.NodeSwitch),
	}}, nil
}

// PodNetwork is the pod-network annotation of a pod with address ip on subnet: the MAC
// derived from ip and the cluster router's port as default gateway.
func PodNetwork(subnet netip.Prefix, ip netip.Addr) annotations.PodNetworkInfo {
	return annotations.PodNetworkInfo{
		IPAddresses: []string{netip.PrefixFrom(ip, subnet.Bits()).String()},
		MACAddress:  mac(ip),
		GatewayIPs:  []string{RouterIP(subnet).String()},
	}
}
