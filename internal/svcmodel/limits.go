package svcmodel

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ReasonServiceTooLarge is the Problem of a Service that Limits refuse whole.
const ReasonServiceTooLarge = "ServiceTooLarge"

// Default limits (contract.FlagMaxServiceFrontends, contract.FlagMaxNamespaceFrontends).
const (
	DefaultMaxServiceFrontends   = 2000
	DefaultMaxNamespaceFrontends = 20000
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
}

// Frontends counts svc's frontends: each port on each cluster IP, external IP and load
// balancer ingress IP, and on the nodes (its NodePort). A Service the cluster does not
// implement has none.
func Frontends(svc *corev1.Service) int {
	if !Implemented(svc) {
		return 0
	}
	addrs := max(len(svc.Spec.ClusterIPs), 1) + len(svc.Spec.ExternalIPs)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		addrs += len(svc.Status.LoadBalancer.Ingress)
	}
	if hasNodePorts(svc) {
		addrs++
	}
	return len(svc.Spec.Ports) * addrs
}

// Refused returns, by "namespace/name", the Problem of each Service of svcs the limits
// refuse. svcs may hold several namespaces; a namespace's decision needs all its Services.
func (l Limits) Refused(svcs []*corev1.Service) map[string]Problem {
	out := map[string]Problem{}
	byNS := map[string][]*corev1.Service{}
	for _, s := range svcs {
		byNS[s.Namespace] = append(byNS[s.Namespace], s)
	}
	for ns, list := range byNS {
		// The order decides which Services a namespace over its limit refuses. A namespace
		// whose Services fit together (most are far below the limit) refuses none for its
		// own sake whatever the order, and needs no sorting: the master asks this at every
		// Service's sync.
		total := 0
		for _, s := range list {
			total += Frontends(s)
		}
		if l.PerNamespace > 0 && total > l.PerNamespace {
			list = slices.Clone(list)
			slices.SortFunc(list, func(a, b *corev1.Service) int {
				if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
					return c
				}
				return cmp.Compare(a.Name, b.Name)
			})
		}
		used := 0
		for _, s := range list {
			n := Frontends(s)
			switch {
			case l.PerService > 0 && n > l.PerService:
				out[ns+"/"+s.Name] = Problem{ReasonServiceTooLarge, fmt.Sprintf(
					"%d ports x addresses (cluster, external and ingress IPs, node port) exceed the limit of %d per Service; the Service is not implemented",
					n, l.PerService)}
			case l.PerNamespace > 0 && used+n > l.PerNamespace:
				out[ns+"/"+s.Name] = Problem{ReasonServiceTooLarge, fmt.Sprintf(
					"%d ports x addresses, with the %d of the namespace's older Services, exceed the limit of %d per namespace; the Service is not implemented",
					n, used, l.PerNamespace)}
			default:
				used += n
			}
		}
	}
	return out
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
