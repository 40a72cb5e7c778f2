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

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

// ProxyNameLabel marks a Service another proxy implements: left alone.
const ProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// HealthCheck is what one healthCheckNodePort server answers.
type HealthCheck struct {
	Namespace, Name string
	// LocalEndpoints counts the usable endpoints on this node (the ones the master's
	// gateway router load balancer of this node has).
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
// belongs to the Service its kubernetes.io/service-name label names in its namespace).
func Desired(svcs []*corev1.Service, eps []*discovery.EndpointSlice, node string, nodeIP netip.Addr) State {
	bySvc := map[[2]string][]*discovery.EndpointSlice{}
	for _, s := range eps {
		if name := s.Labels[discovery.LabelServiceName]; name != "" {
			k := [2]string{s.Namespace, name}
			bySvc[k] = append(bySvc[k], s)
		}
	}
	st := State{Health: map[uint16]HealthCheck{}}
	for _, svc := range svcs {
		if !handled(svc) {
			continue
		}
		clusterIP, _ := netip.ParseAddr(svc.Spec.ClusterIP)
		for _, p := range svc.Spec.Ports {
			proto, ok := protocol(p.Protocol)
			if !ok || p.Port <= 0 || p.Port > 65535 {
				continue // the master warns about it with an Event
			}
			port := uint16(p.Port)
			if p.NodePort > 0 && p.NodePort <= 65535 {
				st.NodePorts = append(st.NodePorts, gateway.NodePort{Protocol: proto, Port: uint16(p.NodePort)})
				// SCTP: the kernel here has no SCTP to open a connection with, and its
				// NAT of SCTP is not built in everywhere; TCP and UDP only.
				if clusterIP.Is4() && nodeIP.Is4() && proto != openflow.IPProtoSCTP {
					st.LocalNAT = append(st.LocalNAT, localnat.Rule{Protocol: proto, NodeIP: nodeIP,
						NodePort: uint16(p.NodePort), ClusterIP: clusterIP, Port: port})
				}
			}
			for _, ip := range externalIPs(svc) {
				st.NodePorts = append(st.NodePorts, gateway.NodePort{Protocol: proto, Port: port, IP: ip})
			}
		}
		if hc := svc.Spec.HealthCheckNodePort; hc > 0 && hc <= 65535 && etpLocal(svc) {
			st.Health[uint16(hc)] = HealthCheck{Namespace: svc.Namespace, Name: svc.Name,
				LocalEndpoints: localEndpoints(svc, bySvc[[2]string{svc.Namespace, svc.Name}], node)}
		}
	}
	slices.SortFunc(st.NodePorts, gateway.NodePort.Compare)
	st.NodePorts = slices.Compact(st.NodePorts)
	slices.SortFunc(st.LocalNAT, localnat.Rule.Compare)
	st.LocalNAT = slices.Compact(st.LocalNAT)
	return st
}

// handled: Services the node does something for. Headless and ExternalName Services have
// no virtual IP; a Service with the proxy-name label is another proxy's.
func handled(svc *corev1.Service) bool {
	if _, other := svc.Labels[ProxyNameLabel]; other {
		return false
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != corev1.ClusterIPNone
}

func etpLocal(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort)
}

func protocol(p corev1.Protocol) (uint8, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return openflow.IPProtoTCP, true
	case corev1.ProtocolUDP:
		return openflow.IPProtoUDP, true
	case corev1.ProtocolSCTP:
		return openflow.IPProtoSCTP, true
	}
	return 0, false
}

// externalIPs are the Service's spec.externalIPs and, for a LoadBalancer, its ingress IPs:
// IPv4 only (the bridge's rules are IPv4), unparsable ones skipped.
func externalIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Is4() {
			out = append(out, ip)
		}
	}
	for _, s := range svc.Spec.ExternalIPs {
		add(s)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			add(in.IP)
		}
	}
	return out
}

// localEndpoints counts the distinct addresses on node that the master's load balancers use
// (master/services: usable): ready and not terminating ones (nil Ready means ready); when
// the Service has none anywhere, the serving (nil Serving: as Ready) and terminating ones;
// with publishNotReadyAddresses, all of them. An endpoint's first address is its address.
func localEndpoints(svc *corev1.Service, eps []*discovery.EndpointSlice, node string) int {
	usable := func(e discovery.Endpoint, fallback bool) bool {
		c := e.Conditions
		ready := c.Ready == nil || *c.Ready
		terminating := c.Terminating != nil && *c.Terminating
		serving := c.Serving == nil && ready || c.Serving != nil && *c.Serving
		switch {
		case svc.Spec.PublishNotReadyAddresses:
			return true
		case !fallback:
			return ready && !terminating
		default:
			return serving && terminating
		}
	}
	count := func(fallback, onlyLocal bool) int {
		seen := map[string]bool{}
		for _, s := range eps {
			if s.AddressType != discovery.AddressTypeIPv4 {
				continue
			}
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 0 || !usable(e, fallback) || (onlyLocal && (e.NodeName == nil || *e.NodeName != node)) {
					continue
				}
				seen[e.Addresses[0]] = true
			}
		}
		return len(seen)
	}
	if count(false, false) > 0 {
		return count(false, true)
	}
	return count(true, true)
}
