// Package controller keeps the OVN Northbound database in step with the cluster: the
// Cluster's shared topology, Nodes, Pods, Services and NetworkPolicies (with the address
// sets of their peers).
//
// It is a small runtime (runtime.go) and one reconciler per kind (cluster.go, node.go,
// pod.go, service.go, netpol.go). Informer and NB cache events only enqueue an owner key on
// the one work queue. A worker's sync asks the key's reconciler for the rows the key wants,
// built from the informer and libovsdb caches by the pure packages (topology, services,
// netpol); the runtime diffs them against the rows the key owns (nb.Diff) and applies the
// difference in one transaction, then enqueues the keys the reconciler says the change
// affects. A read error is returned and retried, never taken for "nothing desired", which
// would delete rows. Bad input becomes a Kubernetes Event and a log line and is not retried.
//
// At start-up one batcher (startup.go) converges the kinds with many keys and no side
// effects many keys to a transaction, beside the workers, which sync the other kinds
// meanwhile; each batched kind's keys wait at a gate until its batch has finished, and the
// queue then syncs them as usual and finds little left to do.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Config is what the controllers take from the master's configuration.
type Config struct {
	ClusterCIDR    netip.Prefix
	NodeSubnetBits int
	JoinSubnet     netip.Prefix
	// ServiceCIDRs are the Service ClusterIP ranges; like the cluster CIDR and the join
	// subnet, no Service may claim an address in them as an external IP.
	ServiceCIDRs []netip.Prefix
	// AllowedExternalIPs are the ranges Services may claim as externalIPs or load balancer
	// ingress IPs (svcmodel.ExternalIPPolicy); none allows none.
	AllowedExternalIPs []netip.Prefix
	// ControlPlane is where OVN central listens: pods may not connect there unless a
	// NetworkPolicy allows it (netpol.ClusterRows). No address: no rule.
	ControlPlane netpol.ControlPlane
	// ServiceLimits refuse Services with too many frontends, per Service and per namespace
	// (what the node agents are given); MaxServiceVIPs refuses a Service whose load
	// balancers would carry more VIPs in all (its frontends times the nodes, with a traffic
	// policy Local). Zero values: no limit.
	ServiceLimits  svcmodel.Limits
	MaxServiceVIPs int
	// MaxPolicySize bounds one NetworkPolicy's ACLs, peer address sets and ipBlock
	// prefixes; a larger one fails closed (netpol.Input.MaxSize). Zero: no limit.
	MaxPolicySize int
	// NBOverflow receives a value when the NB client dropped cache events (nb.WatchOverflow):
	// every key is then synced again. Nil: never.
	NBOverflow <-chan struct{}
	// ResyncPeriod is how often every key is synced again, whatever the events said.
	// Zero disables the periodic resync.
	ResyncPeriod time.Duration
	// Workers is the number of keys synced in parallel; zero means 4.
	Workers int
	// SyncTimeout bounds the sync of one key (its NB transaction included); a sync that
	// takes longer is retried. Zero means DefaultSyncTimeout.
	SyncTimeout time.Duration
}

// DefaultSyncTimeout is Config.SyncTimeout's default: far above any sync's cost, so that
// it only ends syncs stuck on an NB that stopped answering.
const DefaultSyncTimeout = 30 * time.Second

// Controller is the runtime: one informer factory, one work queue of owner keys for every
// kind, the NB cache handler, the periodic resync and the start-up batch.
type Controller struct {
	*caches
	nb      client.Client
	factory informers.SharedInformerFactory
	synced  []cache.InformerSynced
	queue   *reconcile.Loop[nb.Key]
	// kinds are the reconcilers, in the order they are primed, batched at start-up and
	// their keys enqueued; byKind finds a key's.
	kinds  []reconciler
	byKind map[nb.Kind]reconciler
	// groups serializes the syncs of an exclusive reconciler's keys that share a group.
	groups groupLocks
	// gate holds the keys of the kinds whose start-up batch has not finished.
	gate startGate

	// refills counts the NB cache refills (reconnections) seen, for logs and tests.
	refills atomic.Int64
	// overflowResyncs counts the full resyncs after dropped NB cache events.
	overflowResyncs atomic.Int64

	metrics     *metrics
	syncTimeout time.Duration
	// leading is set while Run runs (as the leader, or alone).
	leading atomic.Bool
}

// New returns a controller writing to nb (a client from nb.Connect) for the cluster kube.
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
		nb: nbc,
		// Managed fields are most of an object's size and nothing here reads them.
		factory: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(reconcile.StripManagedFields)),
	}
	c.metrics = newMetrics(c)
	c.syncTimeout = cmp.Or(cfg.SyncTimeout, DefaultSyncTimeout)
	c.queue = reconcile.New("ovnt-master", c.sync, log, reconcile.Options{
		Workers: cfg.Workers,
		// Transient failures (NB unreachable, a parent not created yet) retry quickly at
		// first, and at least every 30 s.
		MinRetry: 20 * time.Millisecond, MaxRetry: 30 * time.Second,
		QPS: 100, Burst: 500,
		// An NB that stops answering must not hold the workers (audit M4); the NB
		// client's inactivity probe then reconnects.
		SyncTimeout: c.syncTimeout,
		Observe:     c.metrics.observe,
	})
	podInf := c.factory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("controller: pod index: %w", err)
	}
	c.caches = &caches{
		cfg:        cfg,
		topo:       topology.Config{ClusterCIDR: cfg.ClusterCIDR, JoinSubnet: cfg.JoinSubnet, ServiceCIDRs: cfg.ServiceCIDRs},
		kube:       kube,
		view:       nb.NewCacheView(nbc),
		ipam:       state,
		chassis:    newChassisClaims(),
		log:        log,
		recorder:   recorder,
		nodes:      c.factory.Core().V1().Nodes().Lister(),
		pods:       c.factory.Core().V1().Pods().Lister(),
		podsByNode: podInf.GetIndexer(),
		services:   c.factory.Core().V1().Services().Lister(),
		slices:     c.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer(),
	}
	w := &handlers{factory: c.factory, queue: c.queue, log: log}
	nodes, err := newNodeReconciler(c.caches, w)
	if err != nil {
		return nil, err
	}
	pods, err := newPodReconciler(c.caches, w, nbc)
	if err != nil {
		return nil, err
	}
	svcs, err := newServiceReconciler(c.caches, w)
	if err != nil {
		return nil, err
	}
	policies, peers, err := newNetpolReconcilers(c.caches, nbc, w)
	if err != nil {
		return nil, err
	}
	c.kinds = []reconciler{clusterReconciler{c.caches}, nodes, pods, svcs, peers, policies}
	c.byKind = map[nb.Kind]reconciler{}
	for _, r := range c.kinds {
		c.byKind[r.kind()] = r
	}
	c.synced = w.synced
	return c, nil
}

// Run syncs until ctx is done; call it once. It waits for the informer caches, primes the
// kinds (the pod network rebuilds its allocations from the NB and the annotations, the
// policies their peer index), then syncs every key, including every owner found in the NB,
// so that rows nothing wants any more are deleted, with the start-up batch beside the
// queue. It returns an error only if it could not start.
func (c *Controller) Run(ctx context.Context) error {
	c.leading.Store(true)
	defer c.leading.Store(false)
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
	for _, r := range c.kinds {
		if p, ok := r.(primer); ok {
			if err := p.prime(ctx); err != nil {
				return fmt.Errorf("controller: priming %s: %w", r.kind(), err)
			}
		}
	}
	c.nb.Cache().AddEventHandler(&nbHandler{ctx: ctx, c: c})
	c.globalAtStart(ctx)
	// The work queue turns from here on, while the start-up batch runs: the kinds it does
	// not batch (Nodes, Pods) are never held up by one that takes long (a huge policy).
	// The keys of a batched kind wait until its batch has finished.
	c.gate.hold(c.batchedKinds())
	if err := c.enqueueAll(ctx); err != nil {
		return err
	}
	c.log.Info("Started", "workers", c.cfg.Workers, "clusterCIDR", c.cfg.ClusterCIDR, "joinSubnet", c.cfg.JoinSubnet)

	var wg sync.WaitGroup
	wg.Go(func() { c.startup(ctx) })
	if c.cfg.ResyncPeriod > 0 {
		wg.Go(func() { c.resyncEvery(ctx, c.cfg.ResyncPeriod) })
	}
	if c.cfg.NBOverflow != nil {
		wg.Go(func() { c.resyncOnOverflow(ctx, c.cfg.NBOverflow) })
	}
	c.queue.Run(ctx)
	wg.Wait()
	c.log.Info("Stopped")
	return nil
}

// overflowQuiet is how long resyncOnOverflow waits for the drops to stop: a burst that
// overflows the buffer drops many events, and the keys should read the cache after it.
const overflowQuiet = 500 * time.Millisecond

// resyncOnOverflow syncs every key again once the NB client has dropped cache events and
// has dropped none for overflowQuiet (audit M6): a lost event may have been a row of ours
// that someone deleted, or the NB_Global insertion of a refill.
func (c *Controller) resyncOnOverflow(ctx context.Context, overflow <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-overflow:
		}
		quiet := time.NewTimer(overflowQuiet)
	wait:
		for {
			select {
			case <-ctx.Done():
				quiet.Stop()
				return
			case <-overflow:
				quiet.Reset(overflowQuiet)
			case <-quiet.C:
				break wait
			}
		}
		n := c.overflowResyncs.Add(1)
		c.log.Info("The NB client dropped cache events (its event buffer was full); resyncing every key", "resyncs", n)
		if err := c.enqueueAll(ctx); err != nil {
			c.log.Error(err, "Resync after dropped NB events")
		}
	}
}

// queueLen is the number of keys waiting to be synced.
func (c *Controller) queueLen() int { return c.queue.Len() }

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

// sync is the work queue's: it converges key, unless key's kind is still in its start-up
// batch (the batch converges it; the gate enqueues it again afterwards).
func (c *Controller) sync(ctx context.Context, key nb.Key) error {
	if c.gate.held(key) {
		return nil
	}
	return c.converge(ctx, key)
}

// converge converges one key: its reconciler's desired rows, applied in one transaction,
// then the keys the change affects.
func (c *Controller) converge(ctx context.Context, key nb.Key) error {
	r, ok := c.byKind[key.Kind]
	if !ok {
		return nil // a kind of another build; its rows are left alone
	}
	if x, ok := r.(exclusive); ok {
		g := string(key.Kind) + " " + x.group(key.Name)
		if !holds(ctx, g) {
			defer c.groups.lock(g)()
			ctx = withGroup(ctx, g)
		}
	}
	ctx = withSyncing(ctx, key)
	d, err := r.desired(ctx, key.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if d.keep {
		return nil
	}
	for _, k := range d.syncFirst {
		if syncing(ctx, k) {
			continue // needs each other: the outer sync applies after this one
		}
		if c.gate.holds(k.Kind) {
			return &waitingFor{keys: []nb.Key{k}} // in its start-up batch
		}
		if err := c.converge(ctx, k); err != nil {
			return err
		}
	}
	plan, err := c.apply(ctx, key, d.rows)
	if err != nil {
		return err
	}
	c.followUp(key, d, plan)
	return nil
}

// chainKey is the context key of what a chain of inline syncs (a key, the keys it needs,
// theirs...) holds: the keys being synced, outermost first, and the groups locked.
type chainKey struct{}

type chain struct {
	keys   []nb.Key
	groups []string
}

func chainOf(ctx context.Context) chain {
	ch, _ := ctx.Value(chainKey{}).(chain)
	return ch
}

func withSyncing(ctx context.Context, key nb.Key) context.Context {
	ch := chainOf(ctx)
	ch.keys = append(slices.Clip(ch.keys), key)
	return context.WithValue(ctx, chainKey{}, ch)
}

func withGroup(ctx context.Context, group string) context.Context {
	ch := chainOf(ctx)
	ch.groups = append(slices.Clip(ch.groups), group)
	return context.WithValue(ctx, chainKey{}, ch)
}

// syncing reports whether key is being synced by the chain ctx belongs to: its rows are not
// applied yet, and syncing it again inline would never end.
func syncing(ctx context.Context, key nb.Key) bool { return slices.Contains(chainOf(ctx).keys, key) }

// holds reports whether the chain ctx belongs to holds group's lock.
func holds(ctx context.Context, group string) bool {
	return slices.Contains(chainOf(ctx).groups, group)
}

// groupLocks is one mutex per group name, created on first use.
type groupLocks struct {
	mu    sync.Mutex
	locks map[string]*groupLock
}

type groupLock struct {
	sync.Mutex
	users int
}

// lock locks group and returns its unlock; a group nobody holds or waits for is forgotten.
func (g *groupLocks) lock(group string) (unlock func()) {
	g.mu.Lock()
	if g.locks == nil {
		g.locks = map[string]*groupLock{}
	}
	l := g.locks[group]
	if l == nil {
		l = &groupLock{}
		g.locks[group] = l
	}
	l.users++
	g.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		g.mu.Lock()
		if l.users--; l.users == 0 {
			delete(g.locks, group)
		}
		g.mu.Unlock()
	}
}

// apply makes the rows owned by key equal to rows, in one transaction.
func (c *Controller) apply(ctx context.Context, key nb.Key, rows []nb.Row) (*nb.Plan, error) {
	plan, err := nb.Diff(ctx, c.view, key, rows)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ops, err := plan.ApplyOps(ctx, c.nb)
	c.metrics.transaction(ops, time.Since(start), err)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	n := len(ops)
	if n > 0 {
		c.log.V(2).Info("Applied", "key", key.String(), "changes", plan.String(), "ops", n)
		outer := key
		if ch := chainOf(ctx); len(ch.keys) > 0 {
			outer = ch.keys[0]
		}
		c.metrics.wrote(outer)
	}
	return plan, nil
}

// followUp runs d.afterCommit after key's plan is applied and enqueues the keys it returns.
func (c *Controller) followUp(key nb.Key, d desire, plan *nb.Plan) {
	if d.afterCommit == nil {
		return
	}
	keys, err := d.afterCommit(plan)
	for _, k := range keys {
		c.queue.Add(k)
	}
	if err != nil {
		c.log.Error(err, "Finding the keys a change affects; the periodic resync or their own events sync them", "key", key.String())
	}
}

// enqueueAll enqueues every key of every kind, and every owner of a row in the NB (an owner
// that no longer exists has its rows deleted by its sync). A kind whose keys cannot be
// listed does not stop the others.
func (c *Controller) enqueueAll(ctx context.Context) error {
	var errs []error
	for _, r := range c.kinds {
		keys, err := r.keys()
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s keys: %w", r.kind(), err))
			continue
		}
		for _, k := range keys {
			c.queue.Add(nb.Key{Kind: r.kind(), Name: k})
		}
	}
	rows, err := c.view.All(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing NB rows: %w", err))
	}
	for _, m := range rows {
		c.enqueueOwner(m)
	}
	return errors.Join(errs...)
}

// enqueueOwner enqueues the owner of NB row m, if it is one of ours of a kind we sync. Rows
// of other kinds may belong to controllers this build does not have; they are left alone.
func (c *Controller) enqueueOwner(m model.Model) {
	if key, ours := nb.OwnerOf(m); ours && key.Known() {
		c.queue.Add(key)
	}
}

// globalChanged tells the kinds that watch NB_Global about a change of its one row (old:
// nil for a new row).
func (c *Controller) globalChanged(old, cur model.Model) {
	for _, r := range c.kinds {
		if w, ok := r.(globalWatcher); ok {
			w.globalChanged(old, cur)
		}
	}
}

// globalAtStart is globalChanged for the NB_Global row the master finds at start.
func (c *Controller) globalAtStart(ctx context.Context) {
	var globals []nbdb.NBGlobal
	if err := c.nb.List(ctx, &globals); err != nil {
		c.log.Error(err, "Reading NB_Global")
		return
	}
	for i := range globals {
		c.globalChanged(nil, &globals[i])
	}
}

// nbHandler turns NB cache events into keys. A change to one of our rows by someone else
// (ovn-nbctl, another writer) resyncs its owner, which puts it back.
//
// After a reconnection libovsdb may empty and refill the cache without reporting the rows
// that went away meanwhile (see internal/ovsdb). A refill reports every row again, including
// the one NB_Global row; a second NB_Global insertion therefore means "resync everything".
type nbHandler struct {
	ctx context.Context // Run's
	c   *Controller
}

func (h *nbHandler) OnAdd(table string, m model.Model) {
	if table == nbdb.NBGlobalTable {
		h.c.globalChanged(nil, m)
		n := h.c.refills.Add(1)
		h.c.log.Info("NB cache refilled (reconnected); resyncing every key", "refills", n)
		if err := h.c.enqueueAll(h.ctx); err != nil {
			h.c.log.Error(err, "Resync after reconnection")
		}
		return
	}
	h.c.enqueueOwner(m)
	for _, r := range h.c.kinds {
		if w, ok := r.(rowWatcher); ok {
			for _, k := range w.rowAdded(m) {
				h.c.queue.Add(k)
			}
		}
	}
}

func (h *nbHandler) OnUpdate(table string, old, cur model.Model) {
	if table == nbdb.NBGlobalTable {
		h.c.globalChanged(old, cur)
		return
	}
	if nb.ManagedEqual(old, cur) {
		return // only reference columns changed, e.g. another owner's port on our switch
	}
	h.c.enqueueOwner(old)
	h.c.enqueueOwner(cur)
}

func (h *nbHandler) OnDelete(table string, m model.Model) {
	h.c.enqueueOwner(m)
}
