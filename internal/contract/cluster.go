package contract

import (
	"fmt"
	"net/netip"
	"strings"
)

// The flags that carry the cluster's address ranges. Both binaries take them under these
// names, and the deployment feeds them to both from one ConfigMap.
const (
	FlagClusterCIDR = "cluster-cidr"
	FlagServiceCIDR = "service-cidr"
	// FlagJoinSubnet is the subnet linking the cluster router to the gateway routers
	// (DefaultJoinSubnet unless set); the node agent needs it only to refuse it as a
	// Service's external IP.
	FlagJoinSubnet = "join-subnet"
	// FlagAllowedExternalIPCIDRs lists the ranges Services may claim as externalIPs or load
	// balancer ingress IPs; empty (the default) allows none (internal/svcmodel
	// ExternalIPPolicy). Master and node must be given the same value.
	FlagAllowedExternalIPCIDRs = "allowed-external-ip-cidrs"
	// FlagMaxServiceFrontends and FlagMaxNamespaceFrontends bound a Service's frontends
	// (ports times addresses) and those of a namespace's Services together; a Service past
	// either is refused whole (internal/svcmodel Limits). Master and node must be given the
	// same values.
	FlagMaxServiceFrontends   = "max-service-frontends"
	FlagMaxNamespaceFrontends = "max-namespace-frontends"
	// FlagMaxNamespaceEntryPoints bounds the gateway entry points (ports times external
	// and ingress IPs, node ports) of a namespace's Services together, each two rules on
	// every node's gateway bridge. Master and node must be given the same value.
	FlagMaxNamespaceEntryPoints = "max-namespace-entry-points"
	// FlagMaxNamespaceVIPs bounds the load balancer VIPs the master writes for a
	// namespace's Services together (the master's alone).
	FlagMaxNamespaceVIPs = "max-namespace-vips"
)

// DefaultJoinSubnet is the default of FlagJoinSubnet.
const DefaultJoinSubnet = "100.64.0.0/16"

// ParseExternalIPCIDRs parses the value of --allowed-external-ip-cidrs: comma-separated
// canonical IPv4 prefixes, possibly none.
func ParseExternalIPCIDRs(s string) ([]netip.Prefix, error) {
	out, err := parsePrefixes(FlagAllowedExternalIPCIDRs, s)
	if err != nil {
		return nil, err
	}
	for _, p := range out {
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("--%s %s: only IPv4 is supported", FlagAllowedExternalIPCIDRs, p)
		}
	}
	return out, nil
}

// ParseJoinSubnet parses the value of --join-subnet: one canonical IPv4 prefix.
func ParseJoinSubnet(s string) (netip.Prefix, error) {
	p, err := parsePrefix(FlagJoinSubnet, s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("--%s %s: only IPv4 is supported", FlagJoinSubnet, p)
	}
	return p, nil
}

// ClusterNetworks are the cluster's address ranges as the master and the node agents are
// given them: the master splits the cluster CIDR into node subnets, and the node agent routes
// both ranges from the host through the management port. Nothing compares one binary's
// values with another's at run time, so both parse and check them here, alike.
type ClusterNetworks struct {
	// ClusterCIDRs are the pod networks (IPv4: interface MACs derive from IPv4 addresses).
	ClusterCIDRs []netip.Prefix
	// ServiceCIDRs are the Service ClusterIP ranges (the API server's
	// --service-cluster-ip-range).
	ServiceCIDRs []netip.Prefix
}

// ParseClusterNetworks parses the values of --cluster-cidr and --service-cidr, each a
// comma-separated list of prefixes (empty entries are skipped; a missing service range is
// allowed). It fails, naming the flag, on a prefix that does not parse or has host bits set,
// on no cluster CIDR or one that is not IPv4, and on any two ranges that overlap.
func ParseClusterNetworks(clusterCIDR, serviceCIDR string) (ClusterNetworks, error) {
	var n ClusterNetworks
	var err error
	if n.ClusterCIDRs, err = parsePrefixes(FlagClusterCIDR, clusterCIDR); err != nil {
		return ClusterNetworks{}, err
	}
	if n.ServiceCIDRs, err = parsePrefixes(FlagServiceCIDR, serviceCIDR); err != nil {
		return ClusterNetworks{}, err
	}
	if len(n.ClusterCIDRs) == 0 {
		return ClusterNetworks{}, fmt.Errorf("--%s is empty", FlagClusterCIDR)
	}
	for _, p := range n.ClusterCIDRs {
		if !p.Addr().Is4() {
			return ClusterNetworks{}, fmt.Errorf("--%s %s: only IPv4 is supported", FlagClusterCIDR, p)
		}
	}
	type named struct {
		flag string
		p    netip.Prefix
	}
	var all []named
	for _, p := range n.ClusterCIDRs {
		all = append(all, named{FlagClusterCIDR, p})
	}
	for _, p := range n.ServiceCIDRs {
		all = append(all, named{FlagServiceCIDR, p})
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.p.Overlaps(b.p) {
				return ClusterNetworks{}, fmt.Errorf("--%s %s overlaps --%s %s", a.flag, a.p, b.flag, b.p)
			}
		}
	}
	return n, nil
}

// parsePrefix parses the value of flag as one canonical prefix.
func parsePrefix(flag, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--%s %q: %w", flag, s, err)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("--%s %q: host bits set (did you mean %s?)", flag, s, p.Masked())
	}
	return p, nil
}

func parsePrefixes(flag, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		p, err := parsePrefix(flag, f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
