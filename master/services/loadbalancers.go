package services

import (
	"fmt"
	"maps"
	"net/netip"
	"strconv"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// clusterLBs are the Service's cluster load balancers, one per protocol, in the cluster
// load balancer group: the ClusterIP VIPs (unless internalTrafficPolicy is Local, topology
// hints apply to the port or an endpoint is a node's own address: then each node switch has
// its own, nodeSwitchLBs) and the external and ingress IP VIPs (unless
// externalTrafficPolicy is Local or an endpoint is a node's own address: then each gateway
// router has its own, nodeRouterLBs), with every usable endpoint. Each port's protocol gets
// its load balancer even without a VIP, so that the NodePort stage finds it; rows drops the
// empty ones.
func clusterLBs(c config) lbSet {
	lbs := lbSet{}
	for _, p := range c.ports {
		opts := maps.Clone(c.options)
		// A VIP without backends answers with a TCP reset or ICMP unreachable rather than
		// letting the client wait for a timeout.
		opts["reject"] = "true"
		opts["event"] = "false"
		l := lbs.get(clusterLBID(c, p), fmt.Sprintf("Service_%s_%s_cluster", c.key, p.port.Proto), p.port.Proto, opts,
			nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterLBGroup))
		if !c.itpLocal && !c.hostEndpoints && !p.hinted {
			for _, ip := range c.clusterIPs {
				l.vips[vip(ip, p.port.Port)] = p.backends
			}
		}
		if !c.etpLocal && !c.hostEndpoints {
			for _, ip := range c.external {
				l.vips[vip(ip, p.port.Port)] = p.backends
			}
		}
	}
	return lbs
}

func clusterLBID(c config, p portConfig) nb.ID {
	return nb.NewID(nb.Service, c.key, nb.ServiceClusterLB).WithScope(p.port.Proto.NB())
}

// addNodePortVIPs adds the NodePort VIPs to the cluster load balancers of lbs (unless
// externalTrafficPolicy is Local: then each gateway router has its own, nodeRouterLBs).
// The template ^NODEIP serves pods reaching their own node's IP through the node switch,
// one row for every node. The gateway routers match contract.NodePortGatewayIP instead,
// which the node's gateway bridge rewrites the node IP to: for a VIP equal to the GR's SNAT
// address northd adds an lr_in_unsnat flow that keeps the first packet out of the SNAT
// zone, but not for a template VIP, so with the template the first packet would miss
// lb_force_snat_ip and the connection break (OVN 23.03).
//
// With session affinity there is no template: northd writes an affinity VIP into its
// logical flows as a quoted literal, which ovn-controller does not expand, so "^NODEIP"
// fails to parse there and vswitchd rejects the whole flow bundle, leaving every node's
// data plane without its updates. Such a Service gets one VIP per node IP instead (nodes
// without an IP have none yet); Rows is then redone as nodes change (HasLocalPolicy).
func addNodePortVIPs(c config, lbs lbSet, nodes []Node) {
	if c.etpLocal {
		return
	}
	_, affinity := c.options["affinity_timeout"]
	for _, p := range c.ports {
		if p.port.NodePort == 0 {
			continue
		}
		l := lbs[clusterLBID(c, p)]
		if !c.hostEndpoints {
			// Else each gateway router has its own (nodeRouterLBs).
			l.vips[vip(contract.NodePortGatewayIP, p.port.NodePort)] = p.backends
		}
		if affinity {
			for _, n := range nodes {
				if n.IP.IsValid() {
					l.vips[vip(n.IP, p.port.NodePort)] = p.backends
				}
			}
		} else {
			l.vips["^"+NodeIPVar+":"+strconv.Itoa(int(p.port.NodePort))] = p.backends
			l.opts["template"] = "true"
			l.opts["address-family"] = "ipv4"
		}
	}
}

// nodeRouterLBs are one load balancer per protocol on each node's gateway router (nodes
// without an IP have none yet) with the NodePort, external and ingress IP VIPs:
//   - for externalTrafficPolicy Local, with only that node's usable endpoints (LocalUsable,
//     which the node's healthCheckNodePort reports too), and the node's own NodePort
//     address for other nodes' pods. Without local endpoints the VIP has no backend and no
//     reject: the router drops, as kube-proxy does.
//   - for a Service with host-network endpoints (hostEndpoints), with every usable endpoint.
//
// On each router the node's own address as a backend is written as its management port
// address (nodeBackends): the router owns the node's address and cannot forward to it.
func nodeRouterLBs(c config, nodes []Node) lbSet {
	lbs := lbSet{}
	if !c.etpLocal && !c.hostEndpoints {
		return lbs
	}
	for _, n := range nodes {
		if !n.IP.IsValid() {
			continue
		}
		for _, p := range c.ports {
			if p.port.NodePort == 0 && len(c.external) == 0 {
				continue
			}
			eps := svcmodel.Usable(p.endpoints, c.svc)
			if c.etpLocal {
				eps = svcmodel.LocalUsable(p.endpoints, c.svc, n.Name)
			}
			backends, host := nodeBackends(eps, n)
			id := nb.NewID(nb.Service, c.key, nb.ServiceNodeRouterLB).WithScope(p.port.Proto.NB() + "/" + n.Name)
			opts := maps.Clone(c.options)
			if c.etpLocal && !host {
				// The client's address reaches the pod: with only this node's endpoints
				// behind the VIP, replies come back through this GR without force SNAT.
				// Not to the host: it would answer the client directly, past the GR that
				// must undo the DNAT.
				opts["skip_snat"] = "true"
			}
			l := lbs.get(id, fmt.Sprintf("Service_%s_%s_node_router_%s", c.key, p.port.Proto, n.Name), p.port.Proto, opts,
				nb.NewID(nb.Node, n.Name, nb.GatewayRouter))
			if p.port.NodePort != 0 {
				// From outside, through the bridge's rewrite; with ETP Local, from this
				// node's pods, routed to their GR with the node IP unchanged.
				l.vips[vip(contract.NodePortGatewayIP, p.port.NodePort)] = backends
				if c.etpLocal {
					l.vips[vip(n.IP, p.port.NodePort)] = backends
				}
			}
			for _, ip := range c.external {
				l.vips[vip(ip, p.port.Port)] = backends
			}
		}
	}
	return lbs
}

// nodeSwitchLBs are one load balancer per protocol on each node switch: for
// internalTrafficPolicy Local, the ClusterIP VIPs with only that node's usable endpoints;
// for a port with topology hints (portConfig.hinted) or a Service with host-network
// endpoints (hostEndpoints), the ClusterIP VIPs with the endpoints that node's clients use
// (switchClusterIPBackends); for externalTrafficPolicy Local, the NodePort VIP of the
// node's own IP with that node's endpoints (nodes without an IP have none yet). A pod
// reaching its own node's IP is rerouted by the cluster router to the management port
// (topology's NodeHostReroute), so it never reaches the gateway router's VIP; the switch
// balances it before routing, to the same endpoints the gateway router would use. On each
// switch the node's own address as a backend is written as its management port address
// (nodeBackends).
//
// A ClusterIP on the node switches cannot stay in the cluster load balancer as well: which
// of two load balancers holding one VIP on one switch (one of them through the group) wins
// is undefined in northd. Host-network clients reach the ClusterIP through their node's
// management port, so through the same switch.
func nodeSwitchLBs(c config, nodes []Node) lbSet {
	lbs := lbSet{}
	for _, n := range nodes {
		if !n.HasSwitch {
			continue
		}
		for _, p := range c.ports {
			nodePort := c.etpLocal && p.port.NodePort != 0 && n.IP.IsValid()
			clusterIP := c.itpLocal || c.hostEndpoints || p.hinted
			if !clusterIP && !nodePort {
				continue
			}
			l := nodeSwitchLB(c, lbs, p, n)
			if clusterIP {
				backends := switchClusterIPBackends(c, p, n)
				for _, ip := range c.clusterIPs {
					l.vips[vip(ip, p.port.Port)] = backends
				}
			}
			if nodePort {
				l.vips[vip(n.IP, p.port.NodePort)], _ = nodeBackends(svcmodel.LocalUsable(p.endpoints, c.svc, n.Name), n)
			}
		}
	}
	return lbs
}

// switchClusterIPBackends are the backends of port p's ClusterIP on node n's switch: under
// internalTrafficPolicy Local the node's own usable endpoints; with topology hints those
// hinted for the node, else for its zone, else all (svcmodel.ForClient); otherwise every
// usable endpoint.
//
// Only ClusterIP traffic follows the hints. NodePorts, external and ingress IPs keep the
// cluster load balancer (or the node's own endpoints under externalTrafficPolicy Local):
// kube-proxy would narrow those to the receiving node's zone too, which here would need a
// gateway router load balancer per node for every hinted Service (README.md).
func switchClusterIPBackends(c config, p portConfig, n Node) string {
	var eps []svcmodel.Endpoint
	switch {
	case c.itpLocal:
		eps = svcmodel.LocalUsable(p.endpoints, c.svc, n.Name)
	case p.hinted:
		eps = svcmodel.ForClient(p.endpoints, c.svc, n.Name, n.Zone)
	default:
		eps = svcmodel.Usable(p.endpoints, c.svc)
	}
	backends, _ := nodeBackends(eps, n)
	return backends
}

// nodeSwitchLB is the load balancer of c's protocol p on node n's switch, in lbs.
func nodeSwitchLB(c config, lbs lbSet, p portConfig, n Node) *lb {
	id := nb.NewID(nb.Service, c.key, nb.ServiceNodeSwitchLB).WithScope(p.port.Proto.NB() + "/" + n.Name)
	return lbs.get(id, fmt.Sprintf("Service_%s_%s_node_switch_%s", c.key, p.port.Proto, n.Name), p.port.Proto, maps.Clone(c.options),
		nb.NewID(nb.Node, n.Name, nb.NodeSwitch))
}

// hasHostEndpoints reports whether an endpoint of c (usable or not, so that the layout does
// not flip with readiness) is the address of a node with a switch: a host-network pod.
func hasHostEndpoints(c config, nodes []Node) bool {
	hosts := map[netip.Addr]bool{}
	for _, n := range nodes {
		if n.HasSwitch && n.IP.IsValid() && n.MgmtIP.IsValid() {
			hosts[n.IP] = true
		}
	}
	if len(hosts) == 0 {
		return false
	}
	for _, p := range c.ports {
		for _, e := range p.endpoints {
			if hosts[e.IP] {
				return true
			}
		}
	}
	return false
}

// nodeBackends are eps as node n's switch and gateway router must write them: n's own
// address becomes its management port address, and host reports whether it was there.
//
// On the switch: the host reaches a ClusterIP through the management port, from that
// address; balanced to the node's own address, the packet would be routed back out the same
// port (NodeHostReroute) and reach the host from its own address, which Linux drops as a
// martian, and the answer would never cross OVN to be un-DNATed. With the management
// address as the backend, OVN sees a hairpin (source == backend) and SNATs the packet to the
// VIP, so the host gets it from the VIP and answers through the port. Pods of the node reach
// the host at that address too, on the same switch.
//
// On the gateway router: the router owns the node's address and cannot forward to it; the
// management address is reached through the cluster router, force-SNATed to the router's
// join address, which the host routes back through the management port.
func nodeBackends(eps []svcmodel.Endpoint, n Node) (string, bool) {
	if !n.IP.IsValid() || !n.MgmtIP.IsValid() {
		return join(eps), false
	}
	host := false
	out := make([]svcmodel.Endpoint, len(eps))
	for i, e := range eps {
		if e.IP == n.IP {
			e.IP, host = n.MgmtIP, true
		}
		out[i] = e
	}
	return join(out), host
}
