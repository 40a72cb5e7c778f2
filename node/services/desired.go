// Package services is the node's part of Services (the master's OVN load balancers do the
// rest, see master/services/README.md): which Service entry points the gateway bridge sends
// to the gateway router, which of the host's own connections to its NodePorts are rewritten
// to the ClusterIP (localnat), and the healthCheckNodePort servers of externalTrafficPolicy
// Local Services.
//
// Desired is a pure function of the Services, EndpointSlices, the node's name and IP;
// Controller feeds it from informers and applies the result.
package services

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

// HealthCheck is what one healthCheckNodePort server answers.
type HealthCheck struct {
	Namespace, Name string
	// LocalEndpoints counts the distinct addresses of the ready endpoints on this node
	// (svcmodel.LocalReady): the backends of the master's load balancer on this node's
	// gateway router, except the terminating ones it falls back to, which count none.
	LocalEndpoints int
}

// State is everything the node does for Services.
type State struct {
	// NodePorts are the gateway bridge's entry points, sorted: NodePorts on the node IP
	// (zero IP), externalIPs and LoadBalancer ingress IPs.
	NodePorts []gateway.NodePort
	// LocalNAT rewrites the host's connections to nodeIP:nodePort to the ClusterIP, sorted.
	LocalNAT []localnat.Rule
	// Health are the healthCheckNodePort servers by port.
	Health map[uint16]HealthCheck
}

// Desired returns what the node must do for svcs and their slices (any namespace; a slice
// belongs to the Service its kubernetes.io/service-name label names in its namespace). It is a
// translation of svcmodel's reading of each Service, the one the master's load balancers are
// built from; external and ingress IPs are those policy admits, as on the master. podNetworks
// are the cluster's pod networks: the host's own connection to an externalTrafficPolicy=Local
// NodePort keeps the node IP as its source only while every backend is a pod.
func Desired(svcs []*corev1.Service, eps []*discovery.EndpointSlice, node string, nodeIP netip.Addr, podNetworks []netip.Prefix,
	policy svcmodel.ExternalIPPolicy) State {
	bySvc := map[[2]string][]*discovery.EndpointSlice{}
	for _, s := range eps {
		if name := s.Labels[discovery.LabelServiceName]; name != "" {
			k := [2]string{s.Namespace, name}
			bySvc[k] = append(bySvc[k], s)
		}
	}
	st := State{Health: map[uint16]HealthCheck{}}
	for _, svc := range svcs {
		if !svcmodel.Implemented(svc) {
			continue
		}
		// Problems are the master's to report, as Events; the node skips the bad part.
		ports, _ := svcmodel.Ports(svc)
		external, _ := svcmodel.ExternalIPs(svc, policy)
		clusterIPs, _ := svcmodel.ClusterIPs(svc)
		own := bySvc[[2]string{svc.Namespace, svc.Name}]
		for _, p := range ports {
			keep := svcmodel.ExternalLocal(svc) && inside(svcmodel.Usable(svcmodel.Endpoints(own, p), svc), podNetworks)
			st.entryPoints(p, clusterIPs, external, nodeIP, keep)
		}
		if hc := svc.Spec.HealthCheckNodePort; hc > 0 && hc <= 65535 && svcmodel.ExternalLocal(svc) {
			local := localEndpoints(svc, ports, own, node)
			st.Health[uint16(hc)] = HealthCheck{Namespace: svc.Namespace, Name: svc.Name, LocalEndpoints: len(local)}
		}
	}
	slices.SortFunc(st.NodePorts, gateway.NodePort.Compare)
	st.NodePorts = slices.Compact(st.NodePorts)
	slices.SortFunc(st.LocalNAT, localnat.Rule.Compare)
	st.LocalNAT = slices.Compact(st.LocalNAT)
	return st
}

// entryPoints adds port p's gateway bridge entry points (its NodePort on the node IP, its
// port on every external and ingress IP) and the host's local NodePort rule, which keeps the
// node IP as the source if keepSource (localnat.Rule.KeepSource).
func (st *State) entryPoints(p svcmodel.Port, clusterIPs, external []netip.Addr, nodeIP netip.Addr, keepSource bool) {
	if p.Port <= 0 || p.Port > 65535 {
		return // the API server refuses it; the bridge's ports are 16 bits
	}
	proto, port := p.Proto.IPProto(), uint16(p.Port)
	if p.NodePort > 0 && p.NodePort <= 65535 {
		st.NodePorts = append(st.NodePorts, gateway.NodePort{Protocol: proto, Port: uint16(p.NodePort)})
		// SCTP: the kernel here has no SCTP to open a connection with, and its NAT of SCTP
		// is not built in everywhere; TCP and UDP only. The first ClusterIP is the one the
		// host reaches the Service by.
		if len(clusterIPs) > 0 && nodeIP.Is4() && p.Proto != svcmodel.SCTP {
			st.LocalNAT = append(st.LocalNAT, localnat.Rule{Protocol: proto, NodeIP: nodeIP,
				NodePort: uint16(p.NodePort), ClusterIP: clusterIPs[0], Port: port, KeepSource: keepSource})
		}
	}
	for _, ip := range external {
		st.NodePorts = append(st.NodePorts, gateway.NodePort{Protocol: proto, Port: port, IP: ip})
	}
}

// localEndpoints are the distinct addresses of svc's ready endpoints on node, over all its
// ports (svcmodel.LocalReady for each port), which the healthCheckNodePort counts: the
// backends of the master's load balancer on this node's gateway router, but none while that
// balancer has fallen back to terminating endpoints (svcmodel.LocalUsable), so that external
// load balancers drain the node.
func localEndpoints(svc *corev1.Service, ports []svcmodel.Port, eps []*discovery.EndpointSlice, node string) []netip.Addr {
	var out []netip.Addr
	for _, p := range ports {
		for _, e := range svcmodel.LocalReady(svcmodel.Endpoints(eps, p), svc, node) {
			out = append(out, e.IP)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// inside reports whether every endpoint of eps is in one of nets.
func inside(eps []svcmodel.Endpoint, nets []netip.Prefix) bool {
	for _, e := range eps {
		if !slices.ContainsFunc(nets, func(n netip.Prefix) bool { return n.Contains(e.IP) }) {
			return false
		}
	}
	return true
}
