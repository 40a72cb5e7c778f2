package svcmodel

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// ReasonExternalIPRefused is the Problem of an externalIP or load balancer ingress IP that
// ExternalIPPolicy refuses.
const ReasonExternalIPRefused = "ExternalIPRefused"

// ExternalIPPolicy is which addresses a Service may claim as an externalIP or a load
// balancer ingress IP. Claiming one makes the cluster answer for that address: every node's
// gateway bridge sends it to the Service, and every pod reaching it is balanced to the
// Service's endpoints (CVE-2020-8554). A namespace user writes spec.externalIPs, so an
// address is admitted only inside a range the operator allowed, and never one the cluster
// itself uses: a node's address (the node's sshd, kubelet or API server port would answer
// from the Service), the pod, Service and join ranges, or an address that is not a unicast
// host address.
//
// The master (load balancer VIPs) and the node (gateway bridge entry points) build the policy
// alike, with NewExternalIPPolicy from the same flags and Nodes, and filter with ExternalIPs:
// both refuse the same addresses.
type ExternalIPPolicy struct {
	// Allowed are the ranges the operator allows (contract.FlagAllowedExternalIPCIDRs).
	// Empty refuses every address: as with Kubernetes' DenyServiceExternalIPs, claiming
	// addresses is opt-in.
	Allowed []netip.Prefix
	// Reserved are ranges refused even inside Allowed: the cluster's own.
	Reserved []netip.Prefix
	// NodeIPs are the addresses of every node, refused even inside Allowed.
	NodeIPs []netip.Addr
}

// NewExternalIPPolicy returns the policy for the allowed ranges, the cluster's own ranges
// (pod, Service and join ranges) and nodes.
func NewExternalIPPolicy(allowed, reserved []netip.Prefix, nodes []*corev1.Node) ExternalIPPolicy {
	return ExternalIPPolicy{Allowed: allowed, Reserved: reserved, NodeIPs: NodeIPs(nodes)}
}

// NodeIPs are the IPv4 addresses of nodes, sorted: the addresses the kubelet reports
// (status.addresses) and the one the node agent reports in its chassis annotation.
func NodeIPs(nodes []*corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				out = append(out, ip)
			}
		}
		if info, err := contract.ParseNodeChassis(n.Annotations[contract.NodeChassisKey]); err == nil {
			if p, err := netip.ParsePrefix(info.NodeIP); err == nil && p.Addr().Is4() {
				out = append(out, p.Addr())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// refusal says why p refuses ip, or "" if it admits it.
func (p ExternalIPPolicy) refusal(ip netip.Addr) string {
	switch {
	case !ip.IsGlobalUnicast(): // loopback, link-local (the NodePort gateway address), multicast, broadcast
		return "is not a unicast host address"
	case slices.Contains(p.NodeIPs, ip):
		return "is a node's address"
	}
	for _, r := range p.Reserved {
		if r.Contains(ip) {
			return fmt.Sprintf("is inside the cluster's own range %s", r)
		}
	}
	for _, a := range p.Allowed {
		if a.Contains(ip) {
			return ""
		}
	}
	if len(p.Allowed) == 0 {
		return fmt.Sprintf("is not allowed: no external IP ranges are allowed (--%s)", contract.FlagAllowedExternalIPCIDRs)
	}
	return fmt.Sprintf("is outside the allowed ranges %v (--%s)", p.Allowed, contract.FlagAllowedExternalIPCIDRs)
}
