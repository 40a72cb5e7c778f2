package services

import "github.com/ovn-transparent/ovn-transparent/internal/svcmodel"

// addZoneVIPs puts the ClusterIP VIPs of the ports with topology hints (portConfig.hinted)
// on each node switch's load balancer of lbs (nodeSwitchLB, shared with the traffic
// policies Local), with the endpoints that node's pods use: those hinted for the node, else
// for its zone, else all (svcmodel.ForClient), the node's own address as its management
// address (nodeBackends, for host-network endpoints). The VIP cannot stay in the cluster load
// balancer as well: which of two load balancers holding one VIP on one switch (one of them
// through the group) wins is undefined in northd. Host-network clients reach
// the ClusterIP through their node's management port, so through the same switch.
//
// Only ClusterIP traffic follows the hints. NodePorts, external and ingress IPs keep the
// cluster load balancer (or the node's own endpoints under externalTrafficPolicy Local):
// kube-proxy would narrow those to the receiving node's zone too, which here would need a
// gateway router load balancer per node for every hinted Service (README.md).
func addZoneVIPs(c config, lbs lbSet, nodes []Node) {
	for _, p := range c.ports {
		if !p.hinted {
			continue
		}
		for _, n := range nodes {
			if !n.HasSwitch {
				continue
			}
			backends, _ := nodeBackends(svcmodel.ForClient(p.endpoints, c.svc, n.Name, n.Zone), n)
			l := nodeSwitchLB(c, lbs, p, n)
			for _, ip := range c.clusterIPs {
				l.vips[vip(ip, p.port.Port)] = backends
			}
		}
	}
}
