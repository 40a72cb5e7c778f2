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
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// rebuild restores the allocations from their durable records before anything is
// allocated, so that no subnet or address is handed out twice across master restarts:
// node subnets from the Node annotations (else from the NB switch's other_config:subnet),
// gateway join addresses from the NB, and pod addresses from the annotations of the pods that
// still need them. Conflicts are left for the syncs, which report them as Events.
func (c *Controller) rebuild(ctx context.Context) error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		p, err := contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
		if err == nil {
			err = c.ipam.ReserveNodeSubnet(n.Name, p)
		}
		if err != nil && n.Annotations[contract.NodeSubnetKey] != "" {
			c.log.V(2).Info("Node subnet annotation not kept", "node", n.Name, "err", err)
		}
	}
	// Only after every annotation: an annotation wins over a switch that remembers the same subnet.
	for _, n := range nodes {
		if _, ok := c.ipam.NodeSubnet(n.Name); ok {
			continue
		}
		if p, ok := c.rememberedSubnet(ctx, n.Name); ok {
			if err := c.ipam.ReserveNodeSubnet(n.Name, p); err == nil {
				c.log.Info("Node subnet restored from its NB switch", "node", n.Name, "subnet", p)
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
	if err := c.rebuildPods(); err != nil {
		return err
	}
	return c.rebuildOrphanPorts(ctx, nodes)
}

// rebuildOrphanPorts reserves the address of every pod port in NB whose pod no longer holds
// one (deleted, or finished, while no master ran), under that pod's key. The port's sync
// deletes it and only then frees the address, as for a pod deleted while the master runs: an
// address handed out while an old port still carries it would put two ports with one MAC
// and IP on a switch, and OVN may keep forwarding to the old one.
func (c *Controller) rebuildOrphanPorts(ctx context.Context, nodes []*corev1.Node) error {
	rows, err := c.view.All(ctx)
	if err != nil {
		return err
	}
	for _, m := range rows {
		lsp, ok := m.(*nbdb.LogicalSwitchPort)
		if !ok || lsp.ExternalIDs[nb.RoleKey] != string(nb.PodPort) || len(lsp.Addresses) != 1 {
			continue
		}
		key := lsp.ExternalIDs[nb.NameKey]
		if _, _, held := c.ipam.PodIP(key); held {
			continue
		}
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
					c.log.V(2).Info("Orphan pod port's address not kept", "pod", key, "ip", ip, "err", err)
				}
				break
			}
		}
	}
	return nil
}

// rebuildPods reserves the annotated address of every pod that still needs one, oldest pod
// first: if two pods claim one address, the one that had it first keeps it.
func (c *Controller) rebuildPods() error {
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
		s, has := p.Annotations[contract.PodNetworkKey]
		if !has || !wantsNetwork(p) {
			continue
		}
		pn, err := contract.ParsePodNetwork(s)
		if err != nil || len(pn.IPs) != 1 {
			continue
		}
		subnet, ok := c.ipam.NodeSubnet(p.Spec.NodeName)
		if !ok || pn.IPs[0].Masked() != subnet {
			continue
		}
		if err := c.ipam.ReservePodIP(p.Spec.NodeName, p.Namespace+"/"+p.Name, pn.IPs[0].Addr()); err != nil {
			c.log.V(2).Info("Pod address not kept", "pod", p.Namespace+"/"+p.Name, "err", err)
			continue
		}
		kept++
	}
	c.log.V(1).Info("Allocations rebuilt", "pods", kept)
	return nil
}
