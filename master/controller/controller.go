// Package controller keeps the OVN Northbound database in step with the cluster's Nodes and
// Pods. Informer and NB cache events only enqueue an owner key (the cluster, a node, a pod);
// a worker's sync reads the informer caches and the libovsdb cache, builds the rows the key
// wants (package topology), diffs them against the rows the key owns (package nbsync) and
// applies the difference in one transaction. Bad input becomes a Kubernetes Event and a log
// line; only transient failures are retried.
package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
)

// Config is what the controllers take from the master's configuration.
type Config struct {
	ClusterCIDR    netip.Prefix
	NodeSubnetBits int
	JoinSubnet     netip.Prefix
	// ResyncPeriod is how often every key is synced again, whatever the events said.
	// Zero disables the periodic resync.
	ResyncPeriod time.Duration
	// Workers is the number of keys synced in parallel; zero means 4.
	Workers int
}

// Controller runs the cluster, node and pod syncs over one work queue of owner keys.
type Controller struct {
	cfg      Config
	topo     topology.Config
	kube     kubernetes.Interface
	nb       client.Client
	view     nbView
	ipam     *ipam.State
	log      klog.Logger
	recorder record.EventRecorder

	factory informers.SharedInformerFactory
	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	podsIdx cache.Indexer
	// services and slicesIdx (EndpointSlices by Service key) feed the Service syncs.
	services  corelisters.ServiceLister
	slicesIdx cache.Indexer
	// NetworkPolicy (netpol.go).
	policies   networkinglisters.NetworkPolicyLister
	namespaces corelisters.NamespaceLister
	np         *netpolIndex
	mgmtMatch  string
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[nb.Key]

	// refills counts the NB cache refills (reconnections) seen, for logs and tests.
	refills atomic.Int64
}

// nbView is what the controllers read of the NB: nb.CacheView of nb.
type nbView interface {
	nb.View
	All(ctx context.Context) ([]model.Model, error)
}

// podsByNode indexes pods by spec.nodeName.
const podsByNode = "spec.nodeName"

// New returns a controller writing to nb (a client from ConnectNB) for the cluster kube.
// Events go to recorder; see NewEventRecorder.
func New(cfg Config, kube kubernetes.Interface, nbc client.Client, recorder record.EventRecorder, log klog.Logger) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	state, err := ipam.NewState(cfg.ClusterCIDR, cfg.NodeSubnetBits, cfg.JoinSubnet)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:      cfg,
		topo:     topology.Config{ClusterCIDR: cfg.ClusterCIDR, JoinSubnet: cfg.JoinSubnet},
		kube:     kube,
		nb:       nbc,
		view:     nb.NewCacheView(nbc),
		ipam:     state,
		log:      log,
		recorder: recorder,
		// Managed fields are most of an object's size and nothing here reads them.
		factory:   informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripManagedFields)),
		np:        newNetpolIndex(),
		mgmtMatch: netpol.ManagementMatch(cfg.ClusterCIDR, cfg.NodeSubnetBits),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter[nb.Key](
				// Transient failures (NB unreachable, a parent not created yet) retry
				// quickly at first, and at least every 30 s.
				workqueue.NewTypedItemExponentialFailureRateLimiter[nb.Key](20*time.Millisecond, 30*time.Second),
				&workqueue.TypedBucketRateLimiter[nb.Key]{Limiter: rate.NewLimiter(rate.Limit(100), 500)},
			),
			workqueue.TypedRateLimitingQueueConfig[nb.Key]{Name: "ovnt-master"}),
	}
	if err := c.setUpInformers(); err != nil {
		return nil, err
	}
	return c, nil
}

// Run syncs until ctx is done; call it once. It waits for the informer caches, rebuilds the
// allocations from the Node and Pod annotations and the NB, then syncs every key, including
// every owner found in the NB, so that rows nothing wants any more are deleted. It returns an
// error only if it could not start.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	// Deferred calls run last-in first-out: the informers are told to stop before
	// Shutdown waits for them, on every return path.
	defer c.factory.Shutdown()
	defer cancel()
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("controller: informer caches did not sync: %w", ctx.Err())
	}
	if err := c.rebuild(ctx); err != nil {
		return err
	}
	c.bulkSyncServices(ctx)
	if err := c.primeNetpol(); err != nil {
		return err
	}
	c.syncNetpolBatched(ctx)
	c.nb.Cache().AddEventHandler(&nbHandler{ctx: ctx, c: c})
	c.nb.Cache().AddEventHandler(npNBHandler{c: c})
	if err := c.enqueueAll(ctx); err != nil {
		return err
	}
	c.log.Info("Started", "workers", c.cfg.Workers, "clusterCIDR", c.cfg.ClusterCIDR, "joinSubnet", c.cfg.JoinSubnet)

	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	if c.cfg.ResyncPeriod > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.resyncEvery(ctx, c.cfg.ResyncPeriod)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("Stopped")
	return nil
}

func (c *Controller) resyncEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.enqueueAll(ctx); err != nil {
				c.log.Error(err, "Periodic resync")
			}
		}
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if ctx.Err() != nil {
		return false
	}
	start := time.Now()
	err := c.sync(ctx, key)
	if err == nil {
		c.queue.Forget(key)
		c.log.V(4).Info("Synced", "key", key.String(), "took", time.Since(start))
		return true
	}
	var missing *nb.MissingParentError
	if errors.As(err, &missing) {
		c.log.V(2).Info("Waiting for a parent row", "key", key.String(), "parent", missing.Parent.String())
	} else if ctx.Err() == nil {
		c.log.Error(err, "Sync failed, will retry", "key", key.String(), "retries", c.queue.NumRequeues(key))
	}
	c.queue.AddRateLimited(key)
	return true
}

func (c *Controller) sync(ctx context.Context, key nb.Key) error {
	switch key.Kind {
	case nb.Cluster:
		rows, err := c.clusterRows(ctx)
		if err != nil {
			return err
		}
		_, err = c.apply(ctx, key, rows)
		return err
	case nb.Node:
		return c.syncNode(ctx, key.Name)
	case nb.Pod:
		return c.syncPod(ctx, key.Name)
	case nb.Service:
		return c.syncService(ctx, key.Name)
	case nb.NetworkPolicy:
		return c.syncPolicy(ctx, key.Name)
	case nb.NetworkPolicyPeer:
		return c.syncPeer(ctx, key.Name)
	}
	return nil
}

// apply makes the rows owned by key equal to rows, in one transaction.
func (c *Controller) apply(ctx context.Context, key nb.Key, rows []nb.Row) (*nb.Plan, error) {
	plan, err := nb.Diff(ctx, c.view, key, rows)
	if err != nil {
		return nil, err
	}
	if plan.Empty() {
		return plan, nil
	}
	ops, err := plan.Ops(c.nb)
	if err != nil {
		return nil, err
	}
	results, err := ovsdb.Transact(ctx, c.nb, ops...)
	if err == nil {
		err = nb.CheckApplied(ops, results)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	c.log.V(2).Info("Applied", "key", key.String(), "changes", plan.String(), "ops", len(ops))
	return plan, nil
}

// stripManagedFields drops metadata.managedFields from objects entering the informer caches.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
