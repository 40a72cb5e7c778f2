package controller

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/services"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
)

// slicesByService indexes EndpointSlices by the "namespace/name" of their Service.
const slicesByService = "service"

// setUpServiceInformers creates the Service and EndpointSlice informers; both enqueue the
// Service's key.
func (c *Controller) setUpServiceInformers() ([]cache.InformerSynced, error) {
	svcInf := c.factory.Core().V1().Services()
	sliceInf := c.factory.Discovery().V1().EndpointSlices()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{slicesByService: func(obj any) ([]string, error) {
		if k, ok := sliceService(obj); ok {
			return []string{k}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("controller: endpointslice index: %w", err)
	}
	c.services, c.slicesIdx = svcInf.Lister(), sliceInf.Informer().GetIndexer()
	svcReg, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueObject(nb.Service, obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Service), cur.(*corev1.Service)
			if !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Status, n.Status) || !reflect.DeepEqual(o.Labels, n.Labels) {
				c.enqueueObject(nb.Service, cur)
			}
		},
		DeleteFunc: func(obj any) { c.enqueueObject(nb.Service, obj) },
	})
	if err != nil {
		return nil, err
	}
	enqueueSlice := func(obj any) {
		if k, ok := sliceService(obj); ok {
			c.queue.Add(nb.Key{Kind: nb.Service, Name: k})
		}
	}
	sliceReg, err := sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueSlice,
		UpdateFunc: func(old, cur any) {
			enqueueSlice(old)
			enqueueSlice(cur)
		},
		DeleteFunc: enqueueSlice,
	})
	if err != nil {
		return nil, err
	}
	return []cache.InformerSynced{svcReg.HasSynced, sliceReg.HasSynced}, nil
}

// sliceService returns the key of the Service an EndpointSlice (or its tombstone) belongs to.
func sliceService(obj any) (string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return "", false
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return "", false
	}
	return s.Namespace + "/" + name, true
}

// syncService converges one Service's load balancers.
func (c *Controller) syncService(ctx context.Context, key string) error {
	rows, err := c.serviceRows(key)
	if err != nil {
		return err
	}
	_, err = c.apply(ctx, nb.Key{Kind: nb.Service, Name: key}, rows)
	return err
}

// serviceRows returns the rows Service key wants (none if it is gone or not ours), and
// reports its problems as Events.
func (c *Controller) serviceRows(key string) ([]nb.Row, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !services.Wanted(svc) {
		return nil, nil
	}
	objs, err := c.slicesIdx.ByIndex(slicesByService, key)
	if err != nil {
		return nil, err
	}
	eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		eps = append(eps, o.(*discoveryv1.EndpointSlice))
	}
	var nodes []services.Node
	if services.HasLocalPolicy(svc) {
		if nodes, err = c.serviceNodes(); err != nil {
			return nil, err
		}
	}
	rows, problems := services.Rows(svc, eps, nodes)
	for _, p := range problems {
		c.warn(svc, p.Reason, "%s", p.Message)
	}
	return rows, nil
}

// serviceNodes lists the nodes as per-node load balancers see them.
func (c *Controller) serviceNodes() ([]services.Node, error) {
	list, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]services.Node, 0, len(list))
	for _, n := range list {
		sn := services.Node{Name: n.Name}
		_, sn.HasSwitch = c.ipam.NodeSubnet(n.Name)
		if info, err := contract.ParseNodeChassis(n.Annotations[contract.NodeChassisKey]); err == nil {
			if p, err := netip.ParsePrefix(info.NodeIP); err == nil && p.Addr().Is4() {
				if _, ok := c.ipam.JoinIP(n.Name); ok {
					sn.IP = p.Addr()
				}
			}
		}
		out = append(out, sn)
	}
	return out, nil
}

// enqueueLocalServices enqueues the Services with per-node load balancers: a node's gateway
// or switch came or went.
func (c *Controller) enqueueLocalServices() {
	list, err := c.services.List(labels.Everything())
	if err != nil {
		c.log.Error(err, "Listing services")
		return
	}
	for _, s := range list {
		if services.HasLocalPolicy(s) {
			c.queue.Add(nb.Key{Kind: nb.Service, Name: s.Namespace + "/" + s.Name})
		}
	}
}

// clusterRows are the Cluster's rows: the shared topology and the load balancer group,
// referenced by every node switch and gateway router in the NB.
func (c *Controller) clusterRows(ctx context.Context) ([]nb.Row, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var refs []nb.ID
	for _, n := range nodes {
		rows, err := c.view.Owned(ctx, nb.Key{Kind: nb.Node, Name: n.Name})
		if err != nil {
			return nil, err
		}
		for _, role := range []nb.Role{nb.NodeSwitch, nb.GatewayRouter} {
			id := nb.NewID(nb.Node, n.Name, role)
			for _, m := range rows {
				if k, ok := nb.IDOf(m); ok && k == id {
					refs = append(refs, id)
					break
				}
			}
		}
	}
	// The ACL log meter is the cluster's too: every namespace's logged ACLs name it.
	rows := append(topology.Cluster(c.topo), topology.ClusterLBGroup(refs))
	return append(rows, netpol.MeterRows()...), nil
}
