package controller

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/services"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
)

// The caches every kind reads, and the questions one kind asks about another's objects,
// answered here rather than in the other kind's file.

// caches is what every reconciler reads: the configuration, the caches, the allocations and
// the Event recorder. It has neither the queue nor the NB writer: a reconciler returns rows
// and keys, and the runtime applies and enqueues them.
type caches struct {
	cfg      Config
	topo     topology.Config
	kube     kubernetes.Interface
	view     nbView
	ipam     *ipam.State
	chassis  *chassisClaims // which node's gateway router each chassis carries
	log      klog.Logger
	recorder record.EventRecorder

	// The listers several kinds read.
	nodes      corelisters.NodeLister
	pods       corelisters.PodLister
	podsByNode cache.Indexer // the pod informer's store, indexed by podsByNode
	services   corelisters.ServiceLister
	slices     cache.Indexer // the EndpointSlice informer's store (service.go's indexes)
}

// nbView is what the controllers read of the NB: nb.CacheView of nb.
type nbView interface {
	nb.View
	All(ctx context.Context) ([]model.Model, error)
}

// podsByNode indexes pods by spec.nodeName.
const podsByNode = "spec.nodeName"

// podsOn returns the keys of the pods bound to node.
func (s *caches) podsOn(node string) ([]nb.Key, error) {
	objs, err := s.podsByNode.ByIndex(podsByNode, node)
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	keys := make([]nb.Key, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			keys = append(keys, nb.Key{Kind: nb.Pod, Name: p.Namespace + "/" + p.Name})
		}
	}
	return keys, nil
}

// servicesNeedingNodes returns the keys of the Services whose load balancers depend on the nodes
// (services.NeedsNodes): a node's gateway, switch or address came or went. Those with
// topology hints have one per node switch too.
func (s *caches) servicesNeedingNodes() ([]nb.Key, error) {
	list, err := s.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	var keys []nb.Key
	for _, svc := range list {
		key := svc.Namespace + "/" + svc.Name
		eps, err := s.serviceSlices(key)
		if err != nil {
			return nil, err
		}
		if services.NeedsNodes(svc, eps, s.cfg.ClusterCIDR) {
			keys = append(keys, nb.Key{Kind: nb.Service, Name: key})
		}
	}
	return keys, nil
}

// hintedServices returns the keys of the Services with a topology-hinted EndpointSlice: their
// ClusterIPs may have a load balancer per node switch, with the endpoints of the node's zone.
func (s *caches) hintedServices() []nb.Key {
	var keys []nb.Key
	for _, k := range s.slices.ListIndexFuncValues(hintedByService) {
		keys = append(keys, nb.Key{Kind: nb.Service, Name: k})
	}
	return keys
}

// serviceSlices returns the EndpointSlices of Service key ("namespace/name").
func (s *caches) serviceSlices(key string) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := s.slices.ByIndex(slicesByService, key)
	if err != nil {
		return nil, fmt.Errorf("list endpointslices of service %s: %w", key, err)
	}
	eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		eps = append(eps, o.(*discoveryv1.EndpointSlice))
	}
	return eps, nil
}
