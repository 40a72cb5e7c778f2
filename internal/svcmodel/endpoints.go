package svcmodel

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Endpoint is one address serving one Service port.
type Endpoint struct {
	IP   netip.Addr
	Port uint16
	// Node is the endpoint's node name, "" if the slice does not say.
	Node string
	// The EndpointSlice conditions with the API's defaults applied: a nil Ready is ready, a
	// nil Serving is as Ready, a nil Terminating is not terminating.
	Ready, Serving, Terminating bool
	// Zones and Nodes are the endpoint's topology hints (hints.forZones, hints.forNodes):
	// the zones and nodes whose clients the EndpointSlice controller meant it for; nil
	// without hints (hints.go).
	Zones, Nodes []string
}

// AddrPort is the endpoint's address and port, a load balancer backend.
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }

// Endpoints are the endpoints of port among slices, which must all be the Service's (the
// caller selects them by their kubernetes.io/service-name label), usable or not. Each slice
// says which number the port's name has in it: a named targetPort can resolve differently
// per pod, and the EndpointSlice controller puts pods that disagree in different slices.
// IPv4 only; an endpoint's first address is its address.
func Endpoints(slices []*discoveryv1.EndpointSlice, port Port) []Endpoint {
	var out []Endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		number, ok := slicePort(s, port)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !ip.Is4() {
				continue
			}
			c := e.Conditions
			ep := Endpoint{IP: ip, Port: number,
				Ready:       c.Ready == nil || *c.Ready,
				Terminating: c.Terminating != nil && *c.Terminating}
			ep.Serving = c.Serving == nil && ep.Ready || c.Serving != nil && *c.Serving
			if e.NodeName != nil {
				ep.Node = *e.NodeName
			}
			ep.Zones, ep.Nodes = hints(e.Hints)
			out = append(out, ep)
		}
	}
	return out
}

// slicePort is the number port has in slice s: the slice port of the same name and protocol
// (nil name: "", nil protocol: TCP), if it is a valid port number.
func slicePort(s *discoveryv1.EndpointSlice, port Port) (uint16, bool) {
	for _, p := range s.Ports {
		name, proto := "", TCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			var ok bool
			if proto, ok = ParseProto(*p.Protocol); !ok {
				continue
			}
		}
		if name == port.Name && proto == port.Proto && p.Port != nil {
			if n := *p.Port; n > 0 && n <= 65535 {
				return uint16(n), true
			}
			return 0, false
		}
	}
	return 0, false
}

// Usable picks the endpoints of eps that take traffic: every one with
// publishNotReadyAddresses, else the ready ones, else (none ready) the serving ones that are
// terminating, so that a rolling update that leaves no ready pod still drains to the old
// ones.
func Usable(eps []Endpoint, svc *corev1.Service) []Endpoint {
	if svc.Spec.PublishNotReadyAddresses {
		return eps
	}
	var ready, terminating []Endpoint
	for _, e := range eps {
		if e.Ready && !e.Terminating {
			ready = append(ready, e)
		} else if e.Serving && e.Terminating {
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// LocalUsable are the usable endpoints of eps on node, for the traffic policies Local: the
// Usable rules applied to node's endpoints alone, so a node without a ready endpoint falls
// back to its own serving and terminating ones even while other nodes have ready ones (as
// kube-proxy's CategorizeEndpoints does for local endpoints). These are the backends of the
// node's per-node load balancers; its healthCheckNodePort counts LocalReady.
func LocalUsable(eps []Endpoint, svc *corev1.Service, node string) []Endpoint {
	return Usable(onNode(eps, node), svc)
}

// LocalReady are the endpoints of eps on node that its healthCheckNodePort counts: every one
// with publishNotReadyAddresses, else the ready ones that are not terminating. A node whose
// load balancer has fallen back to its terminating endpoints (LocalUsable) still takes their
// traffic, but reports none, so that an external load balancer drains it (as kube-proxy's
// health check does).
func LocalReady(eps []Endpoint, svc *corev1.Service, node string) []Endpoint {
	return candidates(onNode(eps, node), svc)
}

func onNode(eps []Endpoint, node string) []Endpoint {
	var local []Endpoint
	for _, e := range eps {
		if e.Node == node {
			local = append(local, e)
		}
	}
	return local
}
