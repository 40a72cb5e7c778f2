package controller

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// rebuild restores the allocations from their durable records before anything is
// allocated, so that no subnet or address is handed out twice across master restarts:
// node subnets from the NB switches' other_config:subnet (else from the Node annotations),
// gateway join addresses and chassis bindings from the NB, pod addresses from the pod ports
// in NB and then from the annotations of the pods that have none. Conflicts are left for the
// syncs, which report them as Events.
func (c *caches) rebuild(ctx context.Context) error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	// The switches first: the NB is the master's own record, which nobody else writes; an
	// annotation on a Node is only a copy, which a node agent may have rewritten (to another
	// node's subnet, say). A subnet two annotations name goes to the node whose switch has it.
	for _, n := range nodes {
		if p, ok := c.rememberedSubnet(ctx, n.Name); ok {
			if err := c.ipam.ReserveNodeSubnet(n.Name, p); err != nil {
				c.log.V(2).Info("Node subnet of the NB switch not kept", "node", n.Name, "subnet", p, "err", err)
			}
		}
	}
	for _, n := range nodes {
		if _, ok := c.ipam.NodeSubnet(n.Name); ok {
			continue
		}
		p, err := contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
		if err == nil {
			err = c.ipam.ReserveNodeSubnet(n.Name, p)
		}
		if err == nil {
			c.log.Info("Node subnet restored from its annotation", "node", n.Name, "subnet", p)
		} else if n.Annotations[contract.NodeSubnetKey] != "" {
			c.log.V(2).Info("Node subnet annotation not kept", "node", n.Name, "err", err)
		}
	}
	for _, n := range nodes {
		if gr, ok := nodeRow[*nbdb.LogicalRouter](ctx, c.view, n.Name, nb.GatewayRouter); ok && gr.Options["chassis"] != "" {
			if owner := c.chassis.claim(n.Name, gr.Options["chassis"]); owner != n.Name {
				c.log.Info("Two gateway routers on one chassis in NB; the first node keeps it", "chassis", gr.Options["chassis"], "node", n.Name, "owner", owner)
			}
		}
	}
	for _, n := range nodes {
		if ip, ok := c.rememberedJoinIP(ctx, n.Name); ok {
			if err := c.ipam.ReserveJoinIP(n.Name, ip); err != nil {
				c.log.V(2).Info("Gateway join address not kept", "node", n.Name, "err", err)
			}
		}
	}
	// The ports first: a port in NB is the master's own record of a pod's address (nobody
	// else writes the NB), an annotation only a copy that a user may have rewritten.
	if err := c.rebuildPorts(ctx, nodes); err != nil {
		return err
	}
	return c.rebuildPods()
}

// rebuildPorts reserves the address of every pod port in NB under its owner's key, before any
// annotation is read: whoever's port holds an address keeps it, and a pod whose annotation
// names another pod's address gets its own back (its sync overwrites the annotation).
//
// A port whose pod no longer needs it (deleted, or finished, while no master ran) keeps its
// address too, under that pod's key. The port's sync deletes it and only then frees the
// address, as for a pod deleted while the master runs: an address handed out while an old
// port still carries it would put two ports with one MAC and IP on a switch, and OVN may keep
// forwarding to the old one.
func (c *caches) rebuildPorts(ctx context.Context, nodes []*corev1.Node) error {
	rows, err := c.view.All(ctx)
	if err != nil {
		return err
	}
	kept := 0
	for _, m := range rows {
		lsp, ok := m.(*nbdb.LogicalSwitchPort)
		if !ok || lsp.ExternalIDs[nb.RoleKey] != string(nb.PodPort) || len(lsp.Addresses) != 1 {
			continue
		}
		key := lsp.ExternalIDs[nb.NameKey]
		f := strings.Fields(lsp.Addresses[0])
		if len(f) != 2 {
			continue
		}
		ip, err := netip.ParseAddr(f[1])
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if subnet, ok := c.ipam.NodeSubnet(n.Name); ok && subnet.Contains(ip) {
				if err := c.ipam.ReservePodIP(n.Name, key, ip); err != nil {
					c.log.V(2).Info("Pod port's address not kept", "pod", key, "ip", ip, "err", err)
				} else {
					kept++
				}
				break
			}
		}
	}
	c.log.V(1).Info("Pod port addresses rebuilt from NB", "ports", kept)
	return nil
}

// rebuildPods reserves the annotated address of every pod that still needs one and has no
// port in NB: a pod annotated just before a master stopped, or every pod after the NB was
// lost. Only a value the master could have written counts (one address of the node's subnet,
// the MAC derived from it, the subnet's gateway), only for an address no port holds, oldest
// pod first. Anything else is left to the pod's sync, which allocates afresh and overwrites
// the annotation.
func (c *caches) rebuildPods() error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if d := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	kept := 0
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		s, has := p.Annotations[contract.PodNetworkKey]
		if !has || !wantsNetwork(p) {
			continue
		}
		if _, _, held := c.ipam.PodIP(key); held {
			continue // its port's address
		}
		pn, err := contract.ParsePodNetwork(s)
		if err != nil || len(pn.IPs) != 1 {
			continue
		}
		subnet, ok := c.ipam.NodeSubnet(p.Spec.NodeName)
		if !ok || pn.IPs[0].Masked() != subnet || !samePodNetwork(s, topology.PodNetwork(subnet, pn.IPs[0].Addr())) {
			continue
		}
		if err := c.ipam.ReservePodIP(p.Spec.NodeName, key, pn.IPs[0].Addr()); err != nil {
			c.log.V(2).Info("Pod address not kept", "pod", key, "err", err)
			continue
		}
		kept++
	}
	c.log.V(1).Info("Pod addresses rebuilt from annotations", "pods", kept)
	return nil
}
