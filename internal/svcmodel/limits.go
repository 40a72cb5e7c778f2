package svcmodel

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ReasonServiceTooLarge is the Problem of a Service that Limits refuse whole.
const ReasonServiceTooLarge = "ServiceTooLarge"

// Default limits (contract.FlagMaxServiceFrontends, contract.FlagMaxNamespaceFrontends,
// contract.FlagMaxNamespaceEntryPoints, contract.FlagMaxNamespaceVIPs).
const (
	DefaultMaxServiceFrontends     = 2000
	DefaultMaxNamespaceFrontends   = 20000
	DefaultMaxNamespaceEntryPoints = 2000
	DefaultMaxNamespaceVIPs        = 100000
)

// Limits bound what one namespace user can make the cluster carry through Services. Nothing
// in Kubernetes bounds a Service's ports or external IPs, and every frontend costs a VIP in
// the master's load balancers and an OpenFlow rule in every node's gateway bridge, rebuilt on
// each change: one Service of 5,000 ports and 20 external IPs was 200,000 rules on every node
// (security audit M5). A Service over a limit is refused whole, never cut: half a Service
// would answer on some of its ports and not on others, with nothing saying which.
//
// The master and the node agents decide alike from the same flags and the same Services,
// counted from the spec only (not from which external IPs a policy admits, which depends on
// the nodes), so both refuse the same Services; the master reports each as an Event.
type Limits struct {
	// PerService is the most frontends one Service may have; 0: no limit.
	PerService int
	// PerNamespace is the most frontends the Services of one namespace may have together;
	// 0: no limit. Services are counted oldest first (creation time, then name), and one that
	// would take its namespace past the limit is refused: a new Service cannot take the place
	// of an old one.
	PerNamespace int
	// PerNamespaceEntryPoints is the most gateway entry points (EntryPoints) the Services of
	// one namespace may have together, counted like PerNamespace; 0: no limit. Each is two
	// OpenFlow rules on every node's gateway bridge: with an external IP range allowed, the
	// frontend limit alone let one namespace write 38,013 of them on every node (security
	// audit 2).
	PerNamespaceEntryPoints int
	// PerNamespaceVIPs is the most VIPs the master writes for the Services of one namespace
	// together (VIPs, with the number of nodes), counted like PerNamespace among the
	// Services the other limits admit; 0: no limit. The master's alone: the node agent writes
	// no VIP. Within the frontend limits, 40 Services of 500 ports with
	// internalTrafficPolicy Local made 2,000,000 VIPs on 100 nodes (security audit 2).
	PerNamespaceVIPs int
}

// Frontends counts svc's frontends: each port on each cluster IP, external IP and load
// balancer ingress IP, and on the nodes (its NodePort). A Service the cluster does not
// implement has none.
func Frontends(svc *corev1.Service) int {
	if !Implemented(svc) {
		return 0
	}
	return len(svc.Spec.Ports)*max(len(svc.Spec.ClusterIPs), 1) + EntryPoints(svc)
}

// EntryPoints counts svc's entry points on every node's gateway bridge: each port on each
// external and ingress IP, and each port's NodePort. The node agent writes two rules for each
// (node/gateway), and one host NAT rule per NodePort.
func EntryPoints(svc *corev1.Service) int {
	if !Implemented(svc) {
		return 0
	}
	addrs := len(svc.Spec.ExternalIPs)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		addrs += len(svc.Status.LoadBalancer.Ingress)
	}
	if hasNodePorts(svc) {
		addrs++
	}
	return len(svc.Spec.Ports) * addrs
}

// PerNode reports whether svc's spec gives it load balancers on every node: a traffic policy
// Local, NodePorts with session affinity (a VIP per node address), or a traffic distribution
// or topology mode (hints, hence a load balancer per node switch).
func PerNode(svc *corev1.Service) bool {
	if ExternalLocal(svc) || InternalLocal(svc) || svc.Spec.TrafficDistribution != nil ||
		svc.Annotations[corev1.AnnotationTopologyMode] != "" {
		return true
	}
	return svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && hasNodePorts(svc)
}

// VIPs bounds the VIPs the master writes for svc with nodes nodes, from the spec: each
// frontend once and a NodePort twice (its template VIP and the gateway routers' address),
// exactly what the cluster load balancer holds; for a Service with load balancers on every
// node (PerNode), that once more per node, an upper bound. Host-network endpoints and hints
// a user writes into the EndpointSlices of a selectorless Service also spread a Service over
// the nodes without the spec saying so; the master's per-Service limit (--max-service-vips)
// counts the VIPs it actually builds.
func VIPs(svc *corev1.Service, nodes int) int {
	f := Frontends(svc)
	if f > 0 && hasNodePorts(svc) {
		f += len(svc.Spec.Ports)
	}
	if PerNode(svc) {
		return f * (max(nodes, 0) + 1)
	}
	return f
}

// Refused returns, by "namespace/name", the Problem of each Service of svcs the limits
// refuse, but for PerNamespaceVIPs (RefusedOnMaster). svcs may hold several namespaces; a
// namespace's decision needs all its Services.
func (l Limits) Refused(svcs []*corev1.Service) map[string]Problem {
	return l.refused(svcs, 0)
}

// RefusedOnMaster is Refused with PerNamespaceVIPs too, for a cluster of nodes nodes: among
// the Services the other limits admit (which the node agents admit too), oldest first, those
// whose VIPs would take their namespace past it.
func (l Limits) RefusedOnMaster(svcs []*corev1.Service, nodes int) map[string]Problem {
	return l.refused(svcs, nodes)
}

// namespaceLimited reports whether a namespace limit applies (nodes > 0: PerNamespaceVIPs).
func (l Limits) namespaceLimited(nodes int) bool {
	return l.PerNamespace > 0 || l.PerNamespaceEntryPoints > 0 || nodes > 0 && l.PerNamespaceVIPs > 0
}

// NamespaceLimited reports whether a namespace's Services are decided together: a Service's
// size can then refuse or admit the others.
func (l Limits) NamespaceLimited() bool {
	return l.PerNamespace > 0 || l.PerNamespaceEntryPoints > 0 || l.PerNamespaceVIPs > 0
}

// count is what one Service or namespace carries, as the limits count it.
type count struct{ frontends, entryPoints, vips int }

func (c count) add(d count) count {
	return count{c.frontends + d.frontends, c.entryPoints + d.entryPoints, c.vips + d.vips}
}

// over says which per-namespace limit used+n passes, "" for none.
func (l Limits) over(used, n count, nodes int) string {
	switch t := used.add(n); {
	case l.PerNamespace > 0 && t.frontends > l.PerNamespace:
		return fmt.Sprintf("%d ports x addresses (cluster, external and ingress IPs, node port), with the %d of the namespace's older Services, exceed the limit of %d per namespace",
			n.frontends, used.frontends, l.PerNamespace)
	case l.PerNamespaceEntryPoints > 0 && t.entryPoints > l.PerNamespaceEntryPoints:
		return fmt.Sprintf("%d gateway entry points (ports x external and ingress IPs, node ports), with the %d of the namespace's older Services, exceed the limit of %d per namespace",
			n.entryPoints, used.entryPoints, l.PerNamespaceEntryPoints)
	case nodes > 0 && l.PerNamespaceVIPs > 0 && t.vips > l.PerNamespaceVIPs:
		return fmt.Sprintf("about %d load balancer VIPs (frontends, times %d nodes for a traffic policy Local, session affinity on node ports or topology hints), with the %d of the namespace's older Services, exceed the limit of %d per namespace",
			n.vips, nodes, used.vips, l.PerNamespaceVIPs)
	}
	return ""
}

// refused is Refused, with PerNamespaceVIPs for nodes > 0. The VIPs are counted over the
// Services the other limits admit, so that the node agents, which do not count VIPs, refuse
// the same Services for the other limits as the master.
func (l Limits) refused(svcs []*corev1.Service, nodes int) map[string]Problem {
	out := map[string]Problem{}
	byNS := map[string][]*corev1.Service{}
	for _, s := range svcs {
		byNS[s.Namespace] = append(byNS[s.Namespace], s)
	}
	for ns, list := range byNS {
		// The order decides which Services a namespace over its limit refuses. A namespace
		// whose Services fit together (most are far below the limits) refuses none for its
		// own sake whatever the order, and needs no sorting: the master asks this at every
		// Service's sync.
		var total count
		for _, s := range list {
			total = total.add(l.count(s, nodes))
		}
		if l.namespaceLimited(nodes) && l.over(count{}, total, nodes) != "" {
			list = slices.Clone(list)
			slices.SortFunc(list, func(a, b *corev1.Service) int {
				if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
					return c
				}
				return cmp.Compare(a.Name, b.Name)
			})
		}
		var used, usedVIPs count // usedVIPs: the Services the node agents admit too
		for _, s := range list {
			n := l.count(s, nodes)
			if l.PerService > 0 && n.frontends > l.PerService {
				out[ns+"/"+s.Name] = Problem{ReasonServiceTooLarge, fmt.Sprintf(
					"%d ports x addresses (cluster, external and ingress IPs, node port) exceed the limit of %d per Service; the Service is not implemented",
					n.frontends, l.PerService)}
				continue
			}
			if why := l.over(used, count{frontends: n.frontends, entryPoints: n.entryPoints}, 0); why != "" {
				out[ns+"/"+s.Name] = Problem{ReasonServiceTooLarge, why + "; the Service is not implemented"}
				continue
			}
			used = used.add(count{frontends: n.frontends, entryPoints: n.entryPoints})
			if why := l.over(count{vips: usedVIPs.vips}, count{vips: n.vips}, nodes); why != "" {
				out[ns+"/"+s.Name] = Problem{ReasonServiceTooLarge, why + "; the Service is not implemented"}
				continue
			}
			usedVIPs.vips += n.vips
		}
	}
	return out
}

// count is what svc carries, VIPs only for nodes > 0.
func (l Limits) count(svc *corev1.Service, nodes int) count {
	c := count{frontends: Frontends(svc), entryPoints: EntryPoints(svc)}
	if nodes > 0 {
		c.vips = VIPs(svc, nodes)
	}
	return c
}

// Admitted returns the Services of svcs that the limits do not refuse, in their order.
func (l Limits) Admitted(svcs []*corev1.Service) []*corev1.Service {
	refused := l.Refused(svcs)
	if len(refused) == 0 {
		return svcs
	}
	out := make([]*corev1.Service, 0, len(svcs))
	for _, s := range svcs {
		if _, no := refused[s.Namespace+"/"+s.Name]; !no {
			out = append(out, s)
		}
	}
	return out
}
