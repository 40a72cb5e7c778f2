package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// nodeReconciler converges Node keys: the node's subnet (allocated, annotated) and its rows
// (switch, management port, gateway router and its external switch). A node's rows feed
// other kinds: its pods wait for its switch, the cluster load balancer group hangs on its
// switch and router, and per-node load balancers follow it.
type nodeReconciler struct{ *caches }

func newNodeReconciler(s *caches, w *handlers) (*nodeReconciler, error) {
	err := w.handle(w.factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.addObject(nb.Node, obj) },
		UpdateFunc: func(old, cur any) {
			// Node status changes every few seconds; only annotations feed the topology.
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if !maps.Equal(o.Annotations, n.Annotations) {
				w.addObject(nb.Node, cur)
			}
		},
		DeleteFunc: func(obj any) { w.addObject(nb.Node, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("controller: node handler: %w", err)
	}
	return &nodeReconciler{s}, nil
}

func (*nodeReconciler) kind() nb.Kind { return nb.Node }

// prime restores the pod network's allocations (rebuild) before any node or pod sync
// allocates.
func (r *nodeReconciler) prime(ctx context.Context) error { return r.rebuild(ctx) }

func (r *nodeReconciler) keys() ([]string, error) { return keysOf(r.nodes.List(labels.Everything())) }

// desired returns a node's rows, after allocating its subnet (annotated on the node first)
// and its gateway router's join address. A node that cannot have a subnet has no rows; a
// deleted node's allocations are freed once its rows are gone.
func (r *nodeReconciler) desired(ctx context.Context, name string) (desire, error) {
	node, err := r.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return desire{afterCommit: func(plan *nb.Plan) ([]nb.Key, error) { return r.deleted(name, plan) }}, nil
	}
	if err != nil {
		return desire{}, err
	}
	subnet, ok := r.nodeSubnet(ctx, node)
	if !ok {
		return desire{}, nil // no subnet, no rows: an Event says why
	}
	if node.Annotations[contract.NodeSubnetKey] != subnet.String() {
		// The annotation first: it is the durable record of the allocation.
		if err := r.annotateNode(ctx, name, contract.NodeSubnetKey, subnet.String()); err != nil {
			return desire{}, fmt.Errorf("annotate node %s with subnet %s: %w", name, subnet, err)
		}
	}
	rows, err := topology.NodeRows(r.topo, topology.Node{Name: name, Subnet: subnet, Gateway: r.nodeGateway(ctx, node)})
	if err != nil {
		return desire{}, err
	}
	return desire{rows: rows, afterCommit: func(plan *nb.Plan) ([]nb.Key, error) { return r.changed(name, plan) }}, nil
}

// changed returns the keys an applied plan of node name affects.
func (r *nodeReconciler) changed(name string, plan *nb.Plan) ([]nb.Key, error) {
	var keys []nb.Key
	var errs []error
	switchCreated := slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.NodeSwitch))
	if switchCreated {
		// Pods that waited for the switch can have their ports now.
		pods, err := r.podsOn(name)
		keys = append(keys, pods...)
		errs = append(errs, err)
	}
	if switchCreated || slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.GatewayRouter)) ||
		slices.Contains(plan.Created, nb.NewID(nb.Node, name, nb.ManagementPort)) {
		// The cluster load balancer group must hang on the new switch or router, and the
		// group of node switches hold the new management port.
		keys = append(keys, nb.Key{Kind: nb.Cluster, Name: nb.ClusterName})
	}
	if !plan.Empty() {
		// Per-node load balancers follow the node's switch, gateway router and address.
		svcs, err := r.servicesNeedingNodes()
		keys = append(keys, svcs...)
		errs = append(errs, err)
	}
	return keys, errors.Join(errs...)
}

// deleted frees the subnet, join address and pod addresses of node name once its rows are
// gone (its pods' ports go with its switch), and returns the keys that affects.
func (r *nodeReconciler) deleted(name string, plan *nb.Plan) ([]nb.Key, error) {
	var keys []nb.Key
	var errs []error
	if !plan.Empty() {
		svcs, err := r.servicesNeedingNodes()
		keys = append(keys, svcs...)
		errs = append(errs, err)
	}
	r.chassis.release(name)
	if freed, ok := r.ipam.ReleaseNode(name); ok {
		r.log.Info("Node deleted, subnet freed", "node", name, "subnet", freed)
		// A node that found the cluster CIDR full may fit now.
		nodes, err := r.nodes.List(labels.Everything())
		if err != nil {
			errs = append(errs, fmt.Errorf("list nodes waiting for a subnet: %w", err))
		}
		for _, n := range nodes {
			if _, has := r.ipam.NodeSubnet(n.Name); !has {
				keys = append(keys, nb.Key{Kind: nb.Node, Name: n.Name})
			}
		}
	}
	return keys, errors.Join(errs...)
}

// nodeSubnet returns node's subnet: the one it holds, else the one its NB switch or its
// annotation remembers (a node re-joining under its name gets its subnet back), else a new one.
// ok is false when the node cannot have one; an Event says why.
func (r *nodeReconciler) nodeSubnet(ctx context.Context, node *corev1.Node) (netip.Prefix, bool) {
	if p, ok := r.ipam.NodeSubnet(node.Name); ok {
		return p, true
	}
	// The NB switch before the annotation: the master's own record before a copy a node
	// agent can write.
	if p, ok := r.rememberedSubnet(ctx, node.Name); ok && r.ipam.ReserveNodeSubnet(node.Name, p) == nil {
		return p, true
	}
	if s, has := node.Annotations[contract.NodeSubnetKey]; has {
		p, err := contract.ParseNodeSubnet(s)
		if err == nil {
			err = r.ipam.ReserveNodeSubnet(node.Name, p)
		}
		if err == nil {
			return p, true
		}
		r.warn(node, ReasonInvalidNodeSubnet, "subnet annotation %q cannot be used (%v); the node gets another subnet", s, err)
	}
	p, err := r.ipam.AllocateNodeSubnet(node.Name)
	if err != nil {
		// Allocate fails only with *ipam.ExhaustedError.
		r.warn(node, ReasonSubnetExhausted, "no pod subnet for this node: %v; it gets one when another node is deleted", err)
		return netip.Prefix{}, false
	}
	r.log.Info("Allocated node subnet", "node", node.Name, "subnet", p)
	return p, true
}

// rememberedSubnet is the subnet in other_config:subnet of the node's switch in the NB.
func (s *caches) rememberedSubnet(ctx context.Context, node string) (netip.Prefix, bool) {
	ls, ok := nodeRow[*nbdb.LogicalSwitch](ctx, s.view, node, nb.NodeSwitch)
	if !ok {
		return netip.Prefix{}, false
	}
	p, err := contract.ParseNodeSubnet(ls.OtherConfig["subnet"])
	return p, err == nil
}

// rememberedJoinIP is the address of the node's gateway router port on the join switch.
func (s *caches) rememberedJoinIP(ctx context.Context, node string) (netip.Addr, bool) {
	lrp, ok := nodeRow[*nbdb.LogicalRouterPort](ctx, s.view, node, nb.GatewayJoinPort)
	if !ok || len(lrp.Networks) != 1 {
		return netip.Addr{}, false
	}
	p, err := netip.ParsePrefix(lrp.Networks[0])
	return p.Addr(), err == nil
}

// nodeRow is the cached row of role owned by node, if there is one of type T. The master's
// own rows are the durable record of what it gave a node before it restarted.
func nodeRow[T model.Model](ctx context.Context, view nb.View, node string, role nb.Role) (T, bool) {
	var zero T
	rows, err := view.Owned(ctx, nb.Key{Kind: nb.Node, Name: node})
	if err != nil {
		return zero, false
	}
	for _, m := range rows {
		if id, ok := nb.IDOf(m); ok && id.Role == role {
			if t, ok := m.(T); ok {
				return t, true
			}
		}
	}
	return zero, false
}

// nodeGateway reads the node agent's chassis annotation and gives the gateway router its join
// address. nil means no gateway router: the node agent has not published its chassis yet, or
// what it published is unusable (an Event says so) and the master wrote none before. A
// node whose annotation is refused keeps the gateway the master last wrote for it.
func (r *nodeReconciler) nodeGateway(ctx context.Context, node *corev1.Node) *topology.Gateway {
	s, has := node.Annotations[contract.NodeChassisKey]
	if !has {
		return nil
	}
	info, err := contract.ParseNodeChassis(s)
	if err != nil {
		return r.keptGateway(ctx, node, err)
	}
	joinIP, err := r.ipam.AllocateJoinIP(node.Name)
	if err != nil {
		r.warn(node, ReasonJoinExhausted, "no gateway router for this node: %v", err)
		return nil
	}
	gw, err := topology.GatewayFrom(info, joinIP)
	if err != nil {
		return r.keptGateway(ctx, node, err)
	}
	// The node address goes into the management port's port_security and the cluster
	// router's reroute: never one that is not the node's (security audit 2, finding 1).
	if err := r.checkNodeIP(node, gw.NodeIP, r.topo.CheckNodeIP); err != nil {
		return r.keptGateway(ctx, node, err)
	}
	if owner := r.chassis.claim(node.Name, gw.ChassisID); owner != node.Name {
		// Never on a node's word alone: keep the router on the chassis it has.
		prev, ok := r.chassis.held(node.Name)
		if !ok {
			r.warn(node, ReasonChassisInUse, "chassis %q carries node %s's gateway router; no gateway router for this node", gw.ChassisID, owner)
			return nil
		}
		r.warn(node, ReasonChassisInUse, "chassis %q carries node %s's gateway router; this node's stays on %q", gw.ChassisID, owner, prev)
		gw.ChassisID = prev
	}
	return gw
}

// checkNodeIP runs check (topology.Config.CheckNodeIP or CheckKeptNodeIP) against every node.
func (s *caches) checkNodeIP(node *corev1.Node, ip netip.Prefix, check func(*corev1.Node, netip.Prefix, []*corev1.Node) error) error {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	return check(node, ip, nodes)
}

// keptGateway reports why node's chassis annotation is refused and returns the gateway the
// master last wrote for it (topology.RememberedGateway), rechecked, or nil.
func (r *nodeReconciler) keptGateway(ctx context.Context, node *corev1.Node, why error) *topology.Gateway {
	owned, err := r.view.Owned(ctx, nb.Key{Kind: nb.Node, Name: node.Name})
	var gw *topology.Gateway
	if err == nil {
		gw = topology.RememberedGateway(owned)
	}
	if gw != nil && r.checkNodeIP(node, gw.NodeIP, r.topo.CheckKeptNodeIP) == nil {
		r.warn(node, ReasonInvalidChassis, "%v; the gateway router keeps node address %s", why, gw.NodeIP)
		return gw
	}
	r.warn(node, ReasonInvalidChassis, "no gateway router for this node: %v", why)
	return nil
}
