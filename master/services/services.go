// Package services says which Northbound load balancers a Service needs: pure functions
// from a Service, its EndpointSlices and the nodes to nb rows, no I/O. What the Service
// means (which ports, addresses and endpoints) is internal/svcmodel's, shared with the node
// agent; this package only lays it out as OVN load balancers, in stages: the Service's
// config, its cluster load balancers, their NodePort VIPs, and the per-node load balancers
// of the traffic policies Local. README.md beside this file describes the layout (which load
// balancer hangs where, and why).
package services

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// NodeIPVar is the template variable each node's Chassis_Template_Var sets to its IP; the
// NodePort VIPs of cluster load balancers are "^NODEIP:<nodePort>".
const NodeIPVar = "NODEIP"

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
	// Zone is the node's topology.kubernetes.io/zone label, "" without one: its pods use
	// the endpoints hinted for it (switchClusterIPBackends).
	Zone string
	// MgmtIP is the node's management port address on its switch; valid when HasSwitch.
	MgmtIP netip.Addr
}

// Problem is input the data plane cannot express; the caller reports it as an Event.
type Problem = svcmodel.Problem

// Reasons of the Problems.
const (
	ReasonUnsupportedProtocol = svcmodel.ReasonUnsupportedProtocol
	ReasonUnsupportedIPFamily = svcmodel.ReasonUnsupportedIPFamily
	ReasonInvalidIP           = svcmodel.ReasonInvalidIP
)

// Wanted reports whether the master implements svc at all (svcmodel.Implemented). A Service
// it does not implement wants no rows.
func Wanted(svc *corev1.Service) bool { return svcmodel.Implemented(svc) }

// HasLocalPolicy reports whether svc's load balancers depend on the nodes: per-node load
// balancers, or NodePorts with session affinity, which have a VIP per node IP
// (addNodePortVIPs).
func HasLocalPolicy(svc *corev1.Service) bool {
	return svcmodel.ExternalLocal(svc) || svcmodel.InternalLocal(svc) || affinityNodePorts(svc)
}

// NeedsNodes reports whether svc's load balancers, given its EndpointSlices eps, may depend
// on the nodes: HasLocalPolicy; topology hints on its endpoints; or an endpoint
// outside the pod network podCIDR, which may be a node's own address (a host-network pod:
// hasHostEndpoints). Checking eps against the pod network is cheap; which node addresses
// they are is Rows' to find out.
func NeedsNodes(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, podCIDR netip.Prefix) bool {
	return HasLocalPolicy(svc) || !svcmodel.InternalLocal(svc) && svcmodel.SlicesHinted(eps) ||
		outsidePodNetwork(eps, podCIDR)
}

// outsidePodNetwork reports whether an IPv4 endpoint of eps is outside podCIDR.
func outsidePodNetwork(eps []*discoveryv1.EndpointSlice, podCIDR netip.Prefix) bool {
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && !podCIDR.Contains(ip) {
					return true
				}
			}
		}
	}
	return false
}

func affinityNodePorts(svc *corev1.Service) bool {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return false
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			return true
		}
	}
	return false
}

// Rows returns the load balancer rows svc wants, given its EndpointSlices, the nodes and the
// policy its external and ingress IPs must pass, and the problems found in its spec. Rows
// are sorted by ID so that equal inputs give equal output.
func Rows(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodes []Node, policy svcmodel.ExternalIPPolicy) ([]nb.Row, []Problem) {
	if !Wanted(svc) {
		return nil, nil
	}
	c, problems := buildConfig(svc, eps, policy)
	c.hostEndpoints = hasHostEndpoints(c, nodes)
	lbs := clusterLBs(c)
	addNodePortVIPs(c, lbs, nodes)
	maps.Copy(lbs, nodeRouterLBs(c, nodes))
	maps.Copy(lbs, nodeSwitchLBs(c, nodes))
	return lbs.rows(), problems
}

// config is one Service as its load balancers see it: svcmodel's reading of the spec, and
// each port's endpoints. Every later stage only reads it.
type config struct {
	svc                  *corev1.Service
	key                  string // <ns>/<name>
	clusterIPs, external []netip.Addr
	etpLocal, itpLocal   bool
	// hostEndpoints: an endpoint is a node's own address (a host-network pod), which
	// each node reaches its own way (hasHostEndpoints): the VIPs move to per-node load
	// balancers.
	hostEndpoints bool
	// options every load balancer of the Service carries (session affinity).
	options map[string]string
	ports   []portConfig
}

type portConfig struct {
	port svcmodel.Port
	// endpoints are all the port's endpoints, usable or not (the per-node stages pick
	// their own); backends are the usable ones, as a VIP's value.
	endpoints []svcmodel.Endpoint
	backends  string
	// hinted: topology hints apply to the port's ClusterIP VIPs, which then sit on each
	// node switch instead of the cluster load balancer (nodeSwitchLBs).
	hinted bool
}

// buildConfig reads svc and its slices. The problems come in the order the Events have
// always had: cluster IPs, external and ingress IPs, ports.
func buildConfig(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, policy svcmodel.ExternalIPPolicy) (config, []Problem) {
	c := config{svc: svc, key: svc.Namespace + "/" + svc.Name,
		etpLocal: svcmodel.ExternalLocal(svc), itpLocal: svcmodel.InternalLocal(svc),
		options: map[string]string{}}
	var problems, p []Problem
	c.clusterIPs, problems = svcmodel.ClusterIPs(svc)
	c.external, p = svcmodel.ExternalIPs(svc, policy)
	problems = append(problems, p...)
	ports, p := svcmodel.Ports(svc)
	problems = append(problems, p...)
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		timeout := int32(DefaultAffinityTimeout)
		if a := svc.Spec.SessionAffinityConfig; a != nil && a.ClientIP != nil && a.ClientIP.TimeoutSeconds != nil {
			timeout = *a.ClientIP.TimeoutSeconds
		}
		c.options["affinity_timeout"] = strconv.Itoa(int(timeout))
	}
	for _, port := range ports {
		all := svcmodel.Endpoints(eps, port)
		c.ports = append(c.ports, portConfig{port: port, endpoints: all, backends: join(svcmodel.Usable(all, svc)),
			hinted: !c.itpLocal && svcmodel.Hinted(all, svc)})
	}
	return c, problems
}

// lb is one load balancer being built.
type lb struct {
	name  string
	proto svcmodel.Proto
	vips  map[string]string
	opts  map[string]string
	refs  []nb.ID
}

// lbSet collects a Service's load balancers by ID.
type lbSet map[nb.ID]*lb

// get returns the load balancer id, made with name, proto, opts and refs if it is new.
func (s lbSet) get(id nb.ID, name string, proto svcmodel.Proto, opts map[string]string, refs ...nb.ID) *lb {
	if l, ok := s[id]; ok {
		return l
	}
	l := &lb{name: name, proto: proto, vips: map[string]string{}, opts: opts, refs: refs}
	s[id] = l
	return l
}

// rows are the load balancers with a VIP, sorted by ID.
func (s lbSet) rows() []nb.Row {
	var rows []nb.Row
	for id, l := range s {
		if len(l.vips) == 0 {
			continue
		}
		p := l.proto.NB()
		// No router answers ARP for a VIP. A gateway router's VIPs include every node's
		// address (NodePorts with affinity) and externalIPs, which reach a node because the
		// network routes them to its address; OVN's default answers for every VIP inside
		// the router's subnet, claiming the other nodes' addresses on the physical network.
		opts := maps.Clone(l.opts)
		if opts == nil {
			opts = map[string]string{}
		}
		opts["neighbor_responder"] = "none"
		rows = append(rows, nb.Row{ID: id, ReferencedBy: l.refs, Model: &nbdb.LoadBalancer{
			Name: l.name, Protocol: &p, Vips: l.vips, Options: opts,
		}})
	}
	slices.SortFunc(rows, func(a, b nb.Row) int { return cmp.Compare(a.ID.String(), b.ID.String()) })
	return rows
}

// VIPs counts the VIPs of rows, the load balancers of one Service.
func VIPs(rows []nb.Row) int {
	n := 0
	for _, r := range rows {
		if l, ok := r.Model.(*nbdb.LoadBalancer); ok {
			n += len(l.Vips)
		}
	}
	return n
}

func vip(ip netip.Addr, port int32) string { return netip.AddrPortFrom(ip, uint16(port)).String() }

// join writes backends as OVN wants them, sorted and without duplicates.
func join(eps []svcmodel.Endpoint) string {
	b := make([]string, 0, len(eps))
	for _, e := range eps {
		b = append(b, e.AddrPort().String())
	}
	slices.Sort(b)
	return strings.Join(slices.Compact(b), ",")
}
