// Package services says which Northbound load balancers a Service needs: pure functions
// from a Service, its EndpointSlices and the nodes to nbsync rows, no I/O. README.md beside
// this file describes the layout (which load balancer hangs where, and why).
package services

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// ProxyNameLabel marks Services another proxy implements; the master leaves them alone.
const ProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// NodeIPVar is the template variable each node's Chassis_Template_Var sets to its IP; the
// NodePort VIPs of cluster load balancers are "^NODEIP:<nodePort>".
const NodeIPVar = "NODEIP"

// NodePortGatewayIP is the address of every NodePort on the gateway routers. The node
// agent's gateway bridge rewrites the node IP to it on the way in and back on the way out
// (node/internal/gateway DefaultNodePortGRIP, ovnt-node --nodeport-gr-ip: they must agree).
// Why not the node IP itself: for a VIP equal to the GR's SNAT address northd adds an
// lr_in_unsnat flow that keeps the first packet out of the SNAT zone, but it does not for a
// template VIP (^NODEIP), so with a template the first packet misses lb_force_snat_ip and the
// connection breaks (OVN 23.03). One constant VIP keeps NodePort at one row per Service.
const NodePortGatewayIP = "169.254.100.1"

// DefaultAffinityTimeout is Kubernetes' default ClientIP affinity timeout, in seconds.
const DefaultAffinityTimeout = 10800

// Node is what a Service's per-node load balancers need of a node.
type Node struct {
	Name string
	// IP is the node's address on the physical network; invalid until the node agent has
	// published its chassis. Only nodes with one have a gateway router.
	IP netip.Addr
	// HasSwitch: the node has a pod subnet, hence a node switch.
	HasSwitch bool
}

// Problem is input the data plane cannot express; the caller reports it as an Event.
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

// Wanted reports whether the master implements svc at all: not headless, not ExternalName,
// not handed to another proxy. A Service it does not implement wants no rows.
func Wanted(svc *corev1.Service) bool {
	if _, other := svc.Labels[ProxyNameLabel]; other {
		return false
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// HasLocalPolicy reports whether svc has per-node load balancers, which depend on the nodes.
func HasLocalPolicy(svc *corev1.Service) bool {
	return externalLocal(svc) || internalLocal(svc)
}

func externalLocal(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer)
}

func internalLocal(svc *corev1.Service) bool {
	return svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
}

// endpoint is one address serving one Service port.
type endpoint struct {
	ip                        netip.Addr
	port                      int32
	node                      string
	ready, serving, terminate bool
}

func (e endpoint) backend() string { return netip.AddrPortFrom(e.ip, uint16(e.port)).String() }

// Rows returns the load balancer rows svc wants, given its EndpointSlices and the nodes,
// and the problems found in its spec. Rows are sorted by ID so that equal inputs give equal
// output.
func Rows(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node) ([]nb.Row, []Problem) {
	if !Wanted(svc) {
		return nil, nil
	}
	key := svc.Namespace + "/" + svc.Name
	var problems []Problem
	clusterIPs := ipv4s(svc.Spec.ClusterIPs, "clusterIP", &problems)
	if len(svc.Spec.ClusterIPs) == 0 {
		clusterIPs = ipv4s([]string{svc.Spec.ClusterIP}, "clusterIP", &problems)
	}
	external := ipv4s(svc.Spec.ExternalIPs, "externalIP", &problems)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		var ingress []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ingress = append(ingress, in.IP)
			}
		}
		external = append(external, ipv4s(ingress, "load balancer ingress IP", &problems)...)
	}
	nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	etpLocal, itpLocal := externalLocal(svc), internalLocal(svc)

	options := map[string]string{}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		timeout := int32(DefaultAffinityTimeout)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		options["affinity_timeout"] = strconv.Itoa(int(timeout))
	}

	// lbs collects VIPs per load balancer ID.
	type lb struct {
		name  string
		proto string
		vips  map[string]string
		opts  map[string]string
		refs  []nb.ID
	}
	lbs := map[nb.ID]*lb{}
	get := func(id nb.ID, name, proto string, opts map[string]string, refs ...nb.ID) *lb {
		if l, ok := lbs[id]; ok {
			return l
		}
		l := &lb{name: name, proto: proto, vips: map[string]string{}, opts: opts, refs: refs}
		lbs[id] = l
		return l
	}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protocol(sp.Protocol)
		if !ok {
			problems = append(problems, Problem{ReasonUnsupportedProtocol,
				fmt.Sprintf("port %q: protocol %q is not supported (TCP, UDP, SCTP); the port is skipped", sp.Name, sp.Protocol)})
			continue
		}
		all := endpointsFor(sp, eps)
		backends := join(usable(all, svc.Spec.PublishNotReadyAddresses))
		upper := strings.ToUpper(proto)
		clusterID := nb.NewID(nb.Service, key, nb.ServiceClusterLB).WithScope(proto)
		clusterOpts := maps.Clone(options)
		// A VIP without backends answers with a TCP reset or ICMP unreachable rather than
		// letting the client wait for a timeout.
		clusterOpts["reject"] = "true"
		clusterOpts["event"] = "false"
		cl := get(clusterID, fmt.Sprintf("Service_%s_%s_cluster", key, upper), proto, clusterOpts,
			nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterLBGroup))
		if !itpLocal {
			for _, ip := range clusterIPs {
				cl.vips[vip(ip, sp.Port)] = backends
			}
		}
		if !etpLocal {
			if nodePorts && sp.NodePort != 0 {
				// The template serves pods reaching their own node's IP through the switch;
				// the gateway routers match the constant address the bridge rewrites to.
				cl.vips["^"+NodeIPVar+":"+strconv.Itoa(int(sp.NodePort))] = backends
				cl.vips[NodePortGatewayIP+":"+strconv.Itoa(int(sp.NodePort))] = backends
				cl.opts["template"] = "true"
				cl.opts["address-family"] = "ipv4"
			}
			for _, ip := range external {
				cl.vips[vip(ip, sp.Port)] = backends
			}
		}
		for _, n := range nodes {
			local := join(usable(onNode(all, n.Name), svc.Spec.PublishNotReadyAddresses))
			if etpLocal && n.IP.IsValid() {
				id := nb.NewID(nb.Service, key, nb.ServiceNodeRouterLB).WithScope(proto + "/" + n.Name)
				opts := maps.Clone(options)
				// The client's address reaches the pod: with only this node's endpoints
				// behind the VIP, replies come back through this GR without force SNAT.
				opts["skip_snat"] = "true"
				l := get(id, fmt.Sprintf("Service_%s_%s_node_router_%s", key, upper, n.Name), proto, opts,
					nb.NewID(nb.Node, n.Name, nb.GatewayRouter))
				if nodePorts && sp.NodePort != 0 {
					// From outside, through the bridge's rewrite; from this node's pods,
					// routed to their GR with the node IP unchanged.
					l.vips[NodePortGatewayIP+":"+strconv.Itoa(int(sp.NodePort))] = local
					l.vips[vip(n.IP, sp.NodePort)] = local
				}
				for _, ip := range external {
					l.vips[vip(ip, sp.Port)] = local
				}
			}
			if itpLocal && n.HasSwitch {
				id := nb.NewID(nb.Service, key, nb.ServiceNodeSwitchLB).WithScope(proto + "/" + n.Name)
				l := get(id, fmt.Sprintf("Service_%s_%s_node_switch_%s", key, upper, n.Name), proto, maps.Clone(options),
					nb.NewID(nb.Node, n.Name, nb.NodeSwitch))
				for _, ip := range clusterIPs {
					l.vips[vip(ip, sp.Port)] = local
				}
			}
		}
	}
	var rows []nb.Row
	for id, l := range lbs {
		if len(l.vips) == 0 {
			continue
		}
		p := l.proto
		rows = append(rows, nb.Row{ID: id, ReferencedBy: l.refs, Model: &nbdb.LoadBalancer{
			Name: l.name, Protocol: &p, Vips: l.vips, Options: l.opts,
		}})
	}
	slices.SortFunc(rows, func(a, b nb.Row) int { return cmp.Compare(a.ID.String(), b.ID.String()) })
	return rows, problems
}

// protocol is the OVN protocol of a Service port protocol.
func protocol(p corev1.Protocol) (string, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return nbdb.LoadBalancerProtocolTCP, true
	case corev1.ProtocolUDP:
		return nbdb.LoadBalancerProtocolUDP, true
	case corev1.ProtocolSCTP:
		return nbdb.LoadBalancerProtocolSCTP, true
	}
	return "", false
}

// ipv4s parses ips; other families and garbage become problems (the cluster is IPv4).
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

func vip(ip netip.Addr, port int32) string { return netip.AddrPortFrom(ip, uint16(port)).String() }

// endpointsFor returns the endpoints of service port sp. Each slice says which port number
// the port's name has in it: a named targetPort can resolve differently per pod, and the
// EndpointSlice controller puts pods that disagree in different slices.
func endpointsFor(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice) []endpoint {
	var out []endpoint
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(-1)
		for _, p := range s.Ports {
			name, proto := "", corev1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if name == sp.Name && proto == sp.Protocol && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port <= 0 || port > 65535 {
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
			ep := endpoint{ip: ip, port: port,
				ready:     e.Conditions.Ready == nil || *e.Conditions.Ready,
				terminate: e.Conditions.Terminating != nil && *e.Conditions.Terminating}
			ep.serving = e.Conditions.Serving == nil && ep.ready || e.Conditions.Serving != nil && *e.Conditions.Serving
			if e.NodeName != nil {
				ep.node = *e.NodeName
			}
			out = append(out, ep)
		}
	}
	return out
}

// usable picks the endpoints that serve: every one with publishNotReadyAddresses, else the
// ready ones, else (none ready) the serving ones that are terminating, so that a rolling
// update that leaves no ready pod still drains to the old ones.
func usable(all []endpoint, publishNotReady bool) []endpoint {
	if publishNotReady {
		return all
	}
	var ready, terminating []endpoint
	for _, e := range all {
		if e.ready && !e.terminate {
			ready = append(ready, e)
		} else if e.serving && e.terminate {
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

func onNode(all []endpoint, node string) []endpoint {
	var out []endpoint
	for _, e := range all {
		if e.node == node {
			out = append(out, e)
		}
	}
	return out
}

// join writes backends as OVN wants them, sorted and without duplicates.
func join(eps []endpoint) string {
	b := make([]string, 0, len(eps))
	for _, e := range eps {
		b = append(b, e.backend())
	}
	slices.Sort(b)
	return strings.Join(slices.Compact(b), ",")
}
