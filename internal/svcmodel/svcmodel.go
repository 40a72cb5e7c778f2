// Package svcmodel is what a Service means to ovn-transparent, read once for both sides: the
// master's OVN load balancers (master/services) and the node's entry points and health checks
// (node/services). The health-check node port must report exactly the endpoints the node's
// gateway router balances to, so both sides take every rule from here rather than each
// keeping a copy. Pure functions of the API objects, no I/O.
//
// The rules follow kube-proxy's (pkg/proxy: ShouldSkipService, CategorizeEndpoints); where
// they change upstream, they change here, once.
package svcmodel

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// ProxyNameLabel marks a Service another proxy implements; ovn-transparent leaves it alone.
const ProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// HeadlessLabel marks a Service that no proxy implements, whatever its ClusterIP (its
// EndpointSlices are still kept, for DNS and other consumers); ovn-transparent leaves it
// alone too.
const HeadlessLabel = "service.kubernetes.io/headless"

// Implemented reports whether ovn-transparent implements svc at all: it has a virtual IP (not
// headless, not ExternalName, ClusterIP set), is not handed to another proxy and is not
// labelled headless (HeadlessLabel). A Service it does not implement gets nothing, on the
// master or on the node.
func Implemented(svc *corev1.Service) bool {
	if _, other := svc.Labels[ProxyNameLabel]; other {
		return false
	}
	if _, headless := svc.Labels[HeadlessLabel]; headless {
		return false
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	// An empty ClusterIP is a Service without a virtual IP, like a headless one: there is
	// no load balancer to send its NodePorts or external IPs to.
	return svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// hasNodePorts: only NodePort and LoadBalancer Services have node ports (the API server
// refuses them on the other types).
func hasNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// ExternalLocal reports whether externalTrafficPolicy Local applies to svc: its NodePorts,
// external and ingress IPs reach only the receiving node's endpoints, and it has a
// healthCheckNodePort.
func ExternalLocal(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && hasNodePorts(svc)
}

// InternalLocal reports whether internalTrafficPolicy Local applies to svc: its ClusterIPs
// reach only the client's node's endpoints.
func InternalLocal(svc *corev1.Service) bool {
	return svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
}

// Problem is input the data plane cannot express. The master reports it as an Event on the
// Service; the node skips the part silently (the master has said it).
type Problem struct {
	Reason  string
	Message string
}

// Reasons of the Problems.
const (
	ReasonUnsupportedProtocol = "UnsupportedServiceProtocol"
	ReasonUnsupportedIPFamily = "UnsupportedIPFamily"
	ReasonInvalidIP           = "InvalidServiceIP"
)

// ClusterIPs are svc's IPv4 cluster IPs: spec.clusterIPs, or spec.clusterIP where an old
// object has no list. Other families and garbage are problems (the cluster is IPv4).
func ClusterIPs(svc *corev1.Service) ([]netip.Addr, []Problem) {
	var problems []Problem
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	return ipv4s(ips, "clusterIP", &problems), problems
}

// ExternalIPs are svc's spec.externalIPs and, for a LoadBalancer, its ingress IPs (an ingress
// with only a hostname has none), IPv4 only, that policy admits; the others are problems.
func ExternalIPs(svc *corev1.Service, policy ExternalIPPolicy) ([]netip.Addr, []Problem) {
	var problems []Problem
	out := admitted(ipv4s(svc.Spec.ExternalIPs, "externalIP", &problems), "externalIP", policy, &problems)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		var ingress []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ingress = append(ingress, in.IP)
			}
		}
		what := "load balancer ingress IP"
		out = append(out, admitted(ipv4s(ingress, what, &problems), what, policy, &problems)...)
	}
	return out, problems
}

// admitted returns the ips policy admits; the others become problems.
func admitted(ips []netip.Addr, what string, policy ExternalIPPolicy, problems *[]Problem) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if why := policy.refusal(ip); why != "" {
			*problems = append(*problems, Problem{ReasonExternalIPRefused, fmt.Sprintf("%s %s %s; refused", what, ip, why)})
			continue
		}
		out = append(out, ip)
	}
	return out
}

// ipv4s parses ips; other families and garbage become problems.
func ipv4s(ips []string, what string, problems *[]Problem) []netip.Addr {
	var out []netip.Addr
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			*problems = append(*problems, Problem{ReasonInvalidIP, fmt.Sprintf("%s %q is not an IP address; skipped", what, s)})
		case !ip.Is4():
			*problems = append(*problems, Problem{ReasonUnsupportedIPFamily,
				fmt.Sprintf("%s %s: the cluster network is IPv4 only; skipped", what, ip)})
		default:
			out = append(out, ip)
		}
	}
	return out
}
