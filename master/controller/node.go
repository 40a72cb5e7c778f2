package controller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// syncNode converges one node: its subnet (allocated, annotated) and its rows.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	key := nb.Key{Kind: nb.Node, Name: name}
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return c.deleteNode(ctx, name)
	}
	if err != nil {
		return err
	}
	subnet, ok := c.nodeSubnet(ctx, node)
	if !ok {
		// No subnet, no rows: an Event says why.
		_, err := c.apply(ctx, key, nil)
		return err
	}
	if node.Annotations[contract.NodeSubnetKey] != subnet.String() {
		// The annotation first: it is the durable record of the allocation.
		if err := c.annotateNode(ctx, name, contract.NodeSubnetKey, subnet.String()); err != nil {
			return fmt.Errorf("annotate node %s with subnet %s: %w", name, subnet, err)
		}
	}
	rows, err := topology.NodeRows(c.topo, topology.Node{Name: name, Subnet: subnet, Gateway: c.nodeGateway(node)})
	if err != nil {
		return err
	}
	plan, err := c.apply(ctx, key, rows)
	if err != nil {
		return err
	}
	if slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.NodeSwitch)) {
		// Pods that waited for the switch can have their ports now.
		c.enqueuePodsOn(name)
	}
	if slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.NodeSwitch)) ||
		slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.GatewayRouter)) {
		// The cluster load balancer group must hang on the new switch or router.
		c.queue.Add(nb.Key{Kind: nb.Cluster, Name: nb.ClusterName})
	}
	if !plan.Empty() {
		// Per-node load balancers follow the node's switch, gateway router and address.
		c.enqueueLocalServices()
	}
	return nil
}

// deleteNode removes a deleted node's rows (its pods' ports go with its switch) and frees its
// subnet, its join address and its pods' addresses.
func (c *Controller) deleteNode(ctx context.Context, name string) error {
	plan, err := c.apply(ctx, nb.Key{Kind: nb.Node, Name: name}, nil)
	if err != nil {
		return err
	}
	if !plan.Empty() {
		c.enqueueLocalServices()
	}
	if freed, ok := c.ipam.ReleaseNode(name); ok {
		c.log.Info("Node deleted, subnet freed", "node", name, "subnet", freed)
		// A node that found the cluster CIDR full may fit now.
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if _, has := c.ipam.NodeSubnet(n.Name); !has {
				c.enqueueObject(nb.Node, n)
			}
		}
	}
	return nil
}

// nodeSubnet returns node's subnet: the one it holds, else the one its annotation or its NB
// switch remembers (a node re-joining under its name gets its subnet back), else a new one.
// ok is false when the node cannot have one; an Event says why.
func (c *Controller) nodeSubnet(ctx context.Context, node *corev1.Node) (netip.Prefix, bool) {
	if p, ok := c.ipam.NodeSubnet(node.Name); ok {
		return p, true
	}
	if s, has := node.Annotations[contract.NodeSubnetKey]; has {
		p, err := contract.ParseNodeSubnet(s)
		if err == nil {
			err = c.ipam.ReserveNodeSubnet(node.Name, p)
		}
		if err == nil {
			return p, true
		}
		c.warn(node, ReasonInvalidNodeSubnet, "subnet annotation %q cannot be used (%v); the node gets another subnet", s, err)
	}
	if p, ok := c.rememberedSubnet(ctx, node.Name); ok && c.ipam.ReserveNodeSubnet(node.Name, p) == nil {
		return p, true
	}
	p, err := c.ipam.AllocateNodeSubnet(node.Name)
	if err != nil {
		// Allocate fails only with *ipam.ExhaustedError.
		c.warn(node, ReasonSubnetExhausted, "no pod subnet for this node: %v; it gets one when another node is deleted", err)
		return netip.Prefix{}, false
	}
	c.log.Info("Allocated node subnet", "node", node.Name, "subnet", p)
	return p, true
}

// rememberedSubnet is the subnet in other_config:subnet of the node's switch in the NB.
func (c *Controller) rememberedSubnet(ctx context.Context, node string) (netip.Prefix, bool) {
	rows, err := c.view.Owned(ctx, nb.Key{Kind: nb.Node, Name: node})
	if err != nil {
		return netip.Prefix{}, false
	}
	for _, m := range rows {
		ls, ok := m.(*nbdb.LogicalSwitch)
		if !ok || ls.ExternalIDs[nb.RoleKey] != string(nb.NodeSwitch) {
			continue
		}
		if p, err := contract.ParseNodeSubnet(ls.OtherConfig["subnet"]); err == nil {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// rememberedJoinIP is the address of the node's gateway router port on the join switch.
func (c *Controller) rememberedJoinIP(ctx context.Context, node string) (netip.Addr, bool) {
	rows, err := c.view.Owned(ctx, nb.Key{Kind: nb.Node, Name: node})
	if err != nil {
		return netip.Addr{}, false
	}
	for _, m := range rows {
		lrp, ok := m.(*nbdb.LogicalRouterPort)
		if !ok || lrp.ExternalIDs[nb.RoleKey] != string(nb.GatewayJoinPort) || len(lrp.Networks) != 1 {
			continue
		}
		if p, err := netip.ParsePrefix(lrp.Networks[0]); err == nil {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// nodeGateway reads the node agent's chassis annotation and gives the gateway router its join
// address. nil means no gateway router: the node agent has not published its chassis yet, or
// what it published is unusable (an Event says so).
func (c *Controller) nodeGateway(node *corev1.Node) *topology.Gateway {
	s, has := node.Annotations[contract.NodeChassisKey]
	if !has {
		return nil
	}
	info, err := contract.ParseNodeChassis(s)
	if err != nil {
		c.warn(node, ReasonInvalidChassis, "no gateway router for this node: %v", err)
		return nil
	}
	joinIP, err := c.ipam.AllocateJoinIP(node.Name)
	if err != nil {
		c.warn(node, ReasonJoinExhausted, "no gateway router for this node: %v", err)
		return nil
	}
	gw, err := topology.GatewayFrom(info, joinIP)
	if err != nil {
		c.warn(node, ReasonInvalidChassis, "no gateway router for this node: %v", err)
		return nil
	}
	return gw
}
