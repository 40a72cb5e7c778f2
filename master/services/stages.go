package services

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// clusterLBs are the Service's cluster load balancers, one per protocol, in the cluster
// load balancer group: the ClusterIP VIPs (unless internalTrafficPolicy is Local, or topology
// hints apply to the port: addZoneVIPs) and the external and ingress IP VIPs (unless
// externalTrafficPolicy is Local), with every usable endpoint. Each port's protocol gets its load balancer even without a VIP, so that the
// NodePort stage finds it; rows drops the empty ones.
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
		if !c.itpLocal && !p.hinted {
			for _, ip := range c.clusterIPs {
				l.vips[vip(ip, p.port.Port)] = p.backends
			}
		}
		if !c.etpLocal {
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
		l.vips[vip(contract.NodePortGatewayIP, p.port.NodePort)] = p.backends
	}
}

// nodeRouterLBs are, for externalTrafficPolicy Local, one load balancer per protocol on
// each node's gateway router (nodes without an IP have none yet) with the NodePort,
// external and ingress IP VIPs and only that node's usable endpoints (LocalUsable, which the
// node's healthCheckNodePort reports too). Without local endpoints the VIP has no backend
// and no reject: the router drops, as kube-proxy does.
func nodeRouterLBs(c config, nodes []Node) lbSet {
	lbs := lbSet{}
	if !c.etpLocal {
		return lbs
	}
	for _, n := range nodes {
		if !n.IP.IsValid() {
			continue
		}
		for _, p := range c.ports {
			id := nb.NewID(nb.Service, c.key, nb.ServiceNodeRouterLB).WithScope(p.port.Proto.NB() + "/" + n.Name)
			opts := maps.Clone(c.options)
			// The client's address reaches the pod: with only this node's endpoints
			// behind the VIP, replies come back through this GR without force SNAT.
			opts["skip_snat"] = "true"
			l := lbs.get(id, fmt.Sprintf("Service_%s_%s_node_router_%s", c.key, p.port.Proto, n.Name), p.port.Proto, opts,
				nb.NewID(nb.Node, n.Name, nb.GatewayRouter))
			local := localBackends(c, p, n)
			if p.port.NodePort != 0 {
				// From outside, through the bridge's rewrite; from this node's pods,
				// routed to their GR with the node IP unchanged.
				l.vips[vip(contract.NodePortGatewayIP, p.port.NodePort)] = local
				l.vips[vip(n.IP, p.port.NodePort)] = local
			}
			for _, ip := range c.external {
				l.vips[vip(ip, p.port.Port)] = local
			}
		}
	}
	return lbs
}

// nodeSwitchLBs are one load balancer per protocol on each node switch with only that node's
// usable endpoints: for internalTrafficPolicy Local, the ClusterIP VIPs; for
// externalTrafficPolicy Local, the NodePort VIP of the node's own IP (nodes without an IP
// have none yet). A pod reaching its own node's IP is rerouted by the cluster router to the
// management port (topology's NodeHostReroute), so it never reaches the gateway router's
// VIP; the switch balances it before routing, to the same endpoints the gateway router
// would use.
func nodeSwitchLBs(c config, nodes []Node) lbSet {
	lbs := lbSet{}
	if !c.itpLocal && !c.etpLocal {
		return lbs
	}
	for _, n := range nodes {
		if !n.HasSwitch {
			continue
		}
		for _, p := range c.ports {
			nodePort := c.etpLocal && p.port.NodePort != 0 && n.IP.IsValid()
			if !c.itpLocal && !nodePort {
				continue
			}
			l := nodeSwitchLB(c, lbs, p, n)
			local := localBackends(c, p, n)
			if c.itpLocal {
				for _, ip := range c.clusterIPs {
					l.vips[vip(ip, p.port.Port)] = local
				}
			}
			if nodePort {
				l.vips[vip(n.IP, p.port.NodePort)] = local
			}
		}
	}
	return lbs
}

// nodeSwitchLB is the load balancer of c's protocol p on node n's switch, in lbs.
func nodeSwitchLB(c config, lbs lbSet, p portConfig, n Node) *lb {
	id := nb.NewID(nb.Service, c.key, nb.ServiceNodeSwitchLB).WithScope(p.port.Proto.NB() + "/" + n.Name)
	return lbs.get(id, fmt.Sprintf("Service_%s_%s_node_switch_%s", c.key, p.port.Proto, n.Name), p.port.Proto, maps.Clone(c.options),
		nb.NewID(nb.Node, n.Name, nb.NodeSwitch))
}

func localBackends(c config, p portConfig, n Node) string {
	return join(svcmodel.LocalUsable(p.endpoints, c.svc, n.Name))
}
