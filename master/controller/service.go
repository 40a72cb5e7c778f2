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
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/services"
)

// slicesByService indexes EndpointSlices by the "namespace/name" of their Service;
// hintedByService indexes only those with topology hints, so that the Services whose load
// balancers follow the nodes' zones are found without reading every slice.
const (
	slicesByService = "service"
	hintedByService = "hinted-service"
)

// serviceReconciler converges Service keys: the load balancers of one Service, from the
// Service, its EndpointSlices (caches.slices, indexed by slicesByService) and, for the
// traffic policies Local, topology hints or host-network endpoints, the nodes. Node syncs
// enqueue the Services with per-node load balancers when a node's rows change.
type serviceReconciler struct{ *caches }

func newServiceReconciler(s *caches, w *handlers) (*serviceReconciler, error) {
	svcInf := w.factory.Core().V1().Services()
	sliceInf := w.factory.Discovery().V1().EndpointSlices()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{slicesByService: func(obj any) ([]string, error) {
		if k, ok := sliceService(obj); ok {
			return []string{k}, nil
		}
		return nil, nil
	}, hintedByService: hintedSliceService}); err != nil {
		return nil, fmt.Errorf("controller: endpointslice index: %w", err)
	}
	err := w.handle(svcInf.Informer(), cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			w.addObject(nb.Service, obj)
			// The informer's first list enqueues every Service anyway: enqueueing the whole
			// namespace again for each of them costs the square of its size at start-up.
			if !initialList {
				s.namespaceLimitChanged(w, obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Service), cur.(*corev1.Service)
			if !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Status, n.Status) || !reflect.DeepEqual(o.Labels, n.Labels) {
				w.addObject(nb.Service, cur)
			}
			if svcmodel.Frontends(o) != svcmodel.Frontends(n) {
				s.namespaceLimitChanged(w, cur)
			}
		},
		DeleteFunc: func(obj any) {
			w.addObject(nb.Service, obj)
			s.namespaceLimitChanged(w, obj)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: service handler: %w", err)
	}
	// A slice changes its Service's load balancers.
	addSlice := func(obj any) {
		if k, ok := sliceService(obj); ok {
			w.add(nb.Key{Kind: nb.Service, Name: k})
		}
	}
	err = w.handle(sliceInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: addSlice,
		UpdateFunc: func(old, cur any) {
			addSlice(old)
			addSlice(cur)
		},
		DeleteFunc: addSlice,
	})
	if err != nil {
		return nil, fmt.Errorf("controller: endpointslice handler: %w", err)
	}
	// A node address that appears or goes changes which external IPs Services may claim.
	err = w.onNodeIPsChanged(func() {
		keys, err := s.externalServices()
		if err != nil {
			s.log.Error(err, "Listing the Services with external IPs after a node address changed; the periodic resync syncs them")
		}
		w.add(keys...)
	})
	if err != nil {
		return nil, fmt.Errorf("controller: node handler for services: %w", err)
	}
	if err := w.onNodeZoneChanged(func() { w.add(s.hintedServices()...) }); err != nil {
		return nil, fmt.Errorf("controller: node zone handler for services: %w", err)
	}
	return &serviceReconciler{s}, nil
}

// namespaceLimitChanged enqueues every Service of obj's namespace when a per-namespace limit
// applies: obj came, went or changed its number of frontends, which can admit or refuse the
// namespace's other Services (svcmodel.Limits counts them oldest first).
func (s *caches) namespaceLimitChanged(w *handlers, obj any) {
	if !s.cfg.ServiceLimits.NamespaceLimited() {
		return
	}
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	list, err := s.services.Services(svc.Namespace).List(labels.Everything())
	if err != nil {
		s.log.Error(err, "Listing a namespace's Services after one changed its size; the periodic resync syncs them", "namespace", svc.Namespace)
		return
	}
	for _, o := range list {
		if o.Name != svc.Name {
			w.add(nb.Key{Kind: nb.Service, Name: o.Namespace + "/" + o.Name})
		}
	}
}

// refusal is the Problem of svc if the limits refuse it.
func (s *caches) refusal(svc *corev1.Service) (svcmodel.Problem, bool, error) {
	l := s.cfg.ServiceLimits
	if l == (svcmodel.Limits{}) {
		return svcmodel.Problem{}, false, nil
	}
	list := []*corev1.Service{svc}
	if l.NamespaceLimited() {
		var err error
		if list, err = s.services.Services(svc.Namespace).List(labels.Everything()); err != nil {
			return svcmodel.Problem{}, false, fmt.Errorf("list services of namespace %s: %w", svc.Namespace, err)
		}
	}
	// The VIPs per namespace (master only) grow with the nodes.
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return svcmodel.Problem{}, false, fmt.Errorf("list nodes: %w", err)
	}
	p, refused := l.RefusedOnMaster(list, len(nodes))[svc.Namespace+"/"+svc.Name]
	return p, refused, nil
}

// externalPolicy is which external and ingress IPs Services may claim now: the operator's
// ranges, less the cluster's own ranges and every node's address.
func (s *caches) externalPolicy() (svcmodel.ExternalIPPolicy, error) {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return svcmodel.ExternalIPPolicy{}, fmt.Errorf("list nodes: %w", err)
	}
	reserved := append([]netip.Prefix{s.cfg.ClusterCIDR, s.cfg.JoinSubnet}, s.cfg.ServiceCIDRs...)
	return svcmodel.NewExternalIPPolicy(s.cfg.AllowedExternalIPs, reserved, nodes), nil
}

// externalServices returns the keys of the Services that claim external or ingress IPs.
func (s *caches) externalServices() ([]nb.Key, error) {
	list, err := s.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	var keys []nb.Key
	for _, svc := range list {
		if len(svc.Spec.ExternalIPs) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0 {
			keys = append(keys, nb.Key{Kind: nb.Service, Name: svc.Namespace + "/" + svc.Name})
		}
	}
	return keys, nil
}

func (*serviceReconciler) kind() nb.Kind { return nb.Service }

// batchSize: the start-up batch converges the Services 500 to a transaction (make
// bench-services measures it).
func (*serviceReconciler) batchSize() int { return 500 }

func (r *serviceReconciler) keys() ([]string, error) {
	return keysOf(r.services.List(labels.Everything()))
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

// desired returns the rows Service key wants (none if it is gone or not ours), and reports
// its problems as Events.
func (r *serviceReconciler) desired(_ context.Context, key string) (desire, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return desire{}, nil
	}
	svc, err := r.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return desire{}, nil
	}
	if err != nil {
		return desire{}, err
	}
	if !services.Wanted(svc) {
		return desire{}, nil
	}
	// A refused Service keeps no load balancer: the rows it had are deleted as stale.
	if p, refused, err := r.refusal(svc); err != nil || refused {
		if refused {
			r.warn(svc, p.Reason, "%s", p.Message)
		}
		return desire{}, err
	}
	eps, err := r.serviceSlices(key)
	if err != nil {
		return desire{}, err
	}
	var nodes []services.Node
	if services.NeedsNodes(svc, eps, r.cfg.ClusterCIDR) {
		if nodes, err = r.serviceNodes(); err != nil {
			return desire{}, err
		}
	}
	policy, err := r.externalPolicy()
	if err != nil {
		return desire{}, err
	}
	rows, problems := services.Rows(svc, eps, nodes, policy)
	for _, p := range problems {
		r.warn(svc, p.Reason, "%s", p.Message)
	}
	if n := services.VIPs(rows); r.cfg.MaxServiceVIPs > 0 && n > r.cfg.MaxServiceVIPs {
		r.warn(svc, svcmodel.ReasonServiceTooLarge,
			"its load balancers would carry %d VIPs (frontends times nodes, for a traffic policy Local, topology hints or host-network endpoints), over the limit of %d per Service; the Service is not implemented",
			n, r.cfg.MaxServiceVIPs)
		return desire{}, nil
	}
	return desire{rows: rows}, nil
}

// serviceNodes lists the nodes as per-node load balancers see them.
func (r *serviceReconciler) serviceNodes() ([]services.Node, error) {
	list, err := r.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]services.Node, 0, len(list))
	ips := r.topo.NodeIPs(list) // only addresses that are the nodes' own (topology.CheckNodeIP)
	for _, n := range list {
		sn := services.Node{Name: n.Name, Zone: n.Labels[corev1.LabelTopologyZone]}
		var subnet netip.Prefix
		if subnet, sn.HasSwitch = r.ipam.NodeSubnet(n.Name); sn.HasSwitch {
			sn.MgmtIP = contract.ManagementIP(subnet)
		}
		if ip, ok := ips[n.Name]; ok {
			if _, ok := r.ipam.JoinIP(n.Name); ok {
				sn.IP = ip
			}
		}
		out = append(out, sn)
	}
	return out, nil
}

// hintedSliceService indexes an EndpointSlice with topology hints by its Service's key.
func hintedSliceService(obj any) ([]string, error) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok && svcmodel.SlicesHinted([]*discoveryv1.EndpointSlice{s}) {
		if k, ok := sliceService(obj); ok {
			return []string{k}, nil
		}
	}
	return nil, nil
}
