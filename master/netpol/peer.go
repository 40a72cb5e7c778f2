// Package netpol translates Kubernetes NetworkPolicies into OVN Northbound rows: a port group
// of the pods a policy selects with the policy's ACLs, and address sets of the pods its peers
// select, shared by identical peers. Everything here is pure: the controller passes the
// policy, namespaces and pods in, and applies the rows with nbsync. README.md gives the design.
package netpol

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// PeerKey is the external_ids key holding a peer's normal form on its address set.
const PeerKey = "k8s.ovn-transparent.io/peer"

// Pod is what the translation needs of a pod.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	// IP is the pod's IPv4 address; invalid when it has none yet. Finished pods are not
	// passed in at all.
	IP    netip.Addr
	Ports []corev1.ContainerPort
	// Port is the pod's logical switch port name, and PortUUID its row in NB ("" while the
	// port does not exist yet).
	Port, PortUUID string
}

// Namespace is what the translation needs of a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Peer is a normalised pod peer: the pods whose addresses one address set holds.
type Peer struct {
	// Namespace is the only namespace of the peer when it has no namespace selector;
	// empty when NamespaceSelector is set.
	Namespace         string
	NamespaceSelector labels.Selector // nil: Namespace only
	PodSelector       labels.Selector
}

// NewPeer normalises a peer of a policy in namespace ns. nsSel nil means the policy's
// namespace; podSel nil means every pod.
func NewPeer(ns string, nsSel, podSel *metav1.LabelSelector) (Peer, error) {
	p := Peer{PodSelector: labels.Everything()}
	if podSel != nil {
		s, err := normalSelector(podSel)
		if err != nil {
			return Peer{}, fmt.Errorf("podSelector: %w", err)
		}
		p.PodSelector = s
	}
	if nsSel == nil {
		p.Namespace = ns
		return p, nil
	}
	s, err := normalSelector(nsSel)
	if err != nil {
		return Peer{}, fmt.Errorf("namespaceSelector: %w", err)
	}
	p.NamespaceSelector = s
	return p, nil
}

// normalSelector converts s with the Kubernetes library, after writing matchLabels as In
// requirements, so that selectors meaning the same print the same (the library sorts
// requirements by key and values).
func normalSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	n := &metav1.LabelSelector{MatchExpressions: slices.Clone(s.MatchExpressions)}
	for k, v := range s.MatchLabels {
		n.MatchExpressions = append(n.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
	}
	return metav1.LabelSelectorAsSelector(n)
}

// String is the normal form: equal for peers that select the same pods by the same rules.
func (p Peer) String() string {
	ns := "namespace=" + p.Namespace
	if p.NamespaceSelector != nil {
		ns = "namespaces=" + p.NamespaceSelector.String()
	}
	return ns + ";pods=" + p.PodSelector.String()
}

// Key is the owner key of the peer's address set: a hash of its normal form.
func (p Peer) Key() string {
	sum := sha256.Sum256([]byte(p.String()))
	return hex.EncodeToString(sum[:8])
}

// AddressSetName is the name of the peer's address set (OVN names: letters, digits, _ and .).
func (p Peer) AddressSetName() string { return "np_peer_" + p.Key() }

// SelectsNamespace reports whether the peer covers pods of ns.
func (p Peer) SelectsNamespace(ns Namespace) bool {
	if p.NamespaceSelector == nil {
		return ns.Name == p.Namespace
	}
	return p.NamespaceSelector.Matches(labels.Set(ns.Labels))
}

// Selects reports whether the peer selects pod, which lives in ns.
func (p Peer) Selects(ns Namespace, pod Pod) bool {
	return p.SelectsNamespace(ns) && p.PodSelector.Matches(labels.Set(pod.Labels))
}

// PeerRow is the address set of peer, holding the addresses of pods (those the peer
// selects; the caller filters).
func PeerRow(p Peer, pods []Pod) nb.Row {
	var addrs []string
	for _, pod := range pods {
		if pod.IP.IsValid() {
			addrs = append(addrs, pod.IP.String())
		}
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	return nb.Row{
		ID: nb.NewID(nb.NetworkPolicyPeer, p.Key(), nb.PeerAddresses),
		Model: &nbdb.AddressSet{
			Name:        p.AddressSetName(),
			Addresses:   addrs,
			ExternalIDs: map[string]string{PeerKey: p.String()},
		},
	}
}
