package svcmodel

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Topology hints. The EndpointSlice controller marks each endpoint with the zones
// (hints.forZones: topology-aware routing, trafficDistribution PreferClose and
// PreferSameZone) or the nodes (hints.forNodes: PreferSameNode) whose clients should use it.
// A client then uses only the endpoints hinted for its node, else for its zone, provided
// every candidate endpoint carries such hints; otherwise every usable endpoint, as if there
// were no hints. The rules are kube-proxy's (CategorizeEndpoints and its hint checks), so a
// Service behaves the same here as on a kube-proxy cluster:
//   - only the ready endpoints count (all of them with publishNotReadyAddresses); a
//     Service with none draws on its terminating ones, all of them, without topology;
//   - node hints first: used when every candidate has one and one names the client's node;
//   - then zone hints: when every candidate has one and one names the client's zone (a
//     node without the zone label has none, so falls back);
//   - hints apply to the cluster-wide endpoints only: internalTrafficPolicy Local picks the
//     node's own endpoints and ignores them.

// hints reads an EndpointSlice endpoint's hints.
func hints(h *discoveryv1.EndpointHints) (zones, nodes []string) {
	if h == nil {
		return nil, nil
	}
	for _, z := range h.ForZones {
		zones = append(zones, z.Name)
	}
	for _, n := range h.ForNodes {
		nodes = append(nodes, n.Name)
	}
	return zones, nodes
}

// candidates are the endpoints of eps hints choose among, and those a node's health check
// counts (LocalReady): every one with publishNotReadyAddresses, else the ready ones that are
// not terminating (Usable's first choice).
func candidates(eps []Endpoint, svc *corev1.Service) []Endpoint {
	if svc.Spec.PublishNotReadyAddresses {
		return eps
	}
	var out []Endpoint
	for _, e := range eps {
		if e.Ready && !e.Terminating {
			out = append(out, e)
		}
	}
	return out
}

// Hinted reports whether hints can narrow the endpoints of eps (one Service port) for some
// client: there is a candidate, and every candidate carries node hints or every one carries
// zone hints. Only then do clients on different nodes see different endpoints (ForClient),
// and the ClusterIP needs a load balancer per node.
func Hinted(eps []Endpoint, svc *corev1.Service) bool {
	c := candidates(eps, svc)
	return len(c) > 0 && (all(c, func(e Endpoint) []string { return e.Nodes }) || all(c, func(e Endpoint) []string { return e.Zones }))
}

// ForClient are the endpoints of eps (one Service port) that a client on node, in zone ("" if
// the node has no zone label), uses: the candidates hinted for node if every candidate has
// node hints and one is for node; else those hinted for zone if every candidate has zone
// hints and one is for zone; else Usable(eps, svc), the same as without hints.
func ForClient(eps []Endpoint, svc *corev1.Service, node, zone string) []Endpoint {
	c := candidates(eps, svc)
	if len(c) == 0 {
		return Usable(eps, svc)
	}
	for _, h := range []struct {
		name  string
		hints func(Endpoint) []string
	}{{node, func(e Endpoint) []string { return e.Nodes }}, {zone, func(e Endpoint) []string { return e.Zones }}} {
		if h.name == "" || !all(c, h.hints) {
			continue
		}
		var matching []Endpoint
		for _, e := range c {
			if slices.Contains(h.hints(e), h.name) {
				matching = append(matching, e)
			}
		}
		if len(matching) > 0 {
			return matching
		}
	}
	return c
}

// all reports whether every endpoint of eps has hints of the kind hints returns.
func all(eps []Endpoint, hints func(Endpoint) []string) bool {
	for _, e := range eps {
		if len(hints(e)) == 0 {
			return false
		}
	}
	return true
}

// SlicesHinted reports whether any endpoint of slices carries a hint: the Service's load
// balancers may then depend on the nodes and their zones (Hinted decides, per port).
func SlicesHinted(slices []*discoveryv1.EndpointSlice) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if h := e.Hints; h != nil && (len(h.ForZones) > 0 || len(h.ForNodes) > 0) {
				return true
			}
		}
	}
	return false
}
