package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// The start-up batch. At start-up thousands of Services or NetworkPolicies would each cost
// one NB transaction (and a northd recompute); the batcher diffs many keys and applies their
// plans in one transaction instead. It is an optimisation only: the work queue syncs every
// key afterwards and finds nothing left, and a key that fails here is left to it. Single
// changes later stay one key, one small transaction.

// batched is a reconciler whose keys the start-up batch converges, batchSize keys to a
// transaction. The kinds are batched in the order of Controller.kinds, a step once the one
// before has finished; a kind that is not batched (Nodes, Pods: their syncs allocate and
// annotate, one object at a time) is left to the queue.
type batched interface {
	batchSize() int
}

// batchedKinds are the kinds of the start-up batch, in order.
func (c *Controller) batchedKinds() []nb.Kind {
	var kinds []nb.Kind
	for _, r := range c.kinds {
		if _, ok := r.(batched); ok {
			kinds = append(kinds, r.kind())
		}
	}
	return kinds
}

// startup runs the start-up batch, while the work queue runs: after each step it lets the
// queue sync the step's kind (every key of it is queued).
func (c *Controller) startup(ctx context.Context) {
	for _, r := range c.kinds {
		b, ok := r.(batched)
		if !ok {
			continue
		}
		if ctx.Err() == nil {
			c.batchKind(ctx, r, b.batchSize())
		}
		for _, k := range c.gate.release(r.kind()) {
			c.queue.Add(k)
		}
	}
}

// startGate holds the work queue's keys of the kinds whose start-up batch has not finished:
// the batch converges them, and a key synced by both at once would race its own writes.
type startGate struct {
	mu      sync.Mutex
	holding map[nb.Kind]bool
	keys    map[nb.Key]bool
}

// hold holds the keys of kinds until release.
func (g *startGate) hold(kinds []nb.Kind) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holding, g.keys = map[nb.Kind]bool{}, map[nb.Key]bool{}
	for _, k := range kinds {
		g.holding[k] = true
	}
}

// holds reports whether kind's keys are held.
func (g *startGate) holds(kind nb.Kind) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding[kind]
}

// held reports whether key's kind is held, and then keeps key for release.
func (g *startGate) held(key nb.Key) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding[key.Kind] {
		return false
	}
	g.keys[key] = true
	return true
}

// release stops holding kind and returns the keys of it held meanwhile.
func (g *startGate) release(kind nb.Kind) []nb.Key {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.holding, kind)
	var keys []nb.Key
	for k := range g.keys {
		if k.Kind == kind {
			keys = append(keys, k)
			delete(g.keys, k)
		}
	}
	return keys
}

// bounded returns ctx bounded by the sync timeout: what one key of a batch may take.
func (c *Controller) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.syncTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.syncTimeout)
}

// batchStats counts what a start-up step did.
type batchStats struct {
	mu                    sync.Mutex
	changed, failed, txns int
}

// batchKind converges every key of r, size keys to a transaction, several transactions
// (up to Workers) at once. Every failure is logged, and its keys are left to the work queue.
func (c *Controller) batchKind(ctx context.Context, r reconciler, size int) {
	start := time.Now()
	kind := r.kind()
	names, err := r.keys()
	if err != nil {
		c.log.Error(err, "Start-up batch: cannot list keys; the work queue syncs them", "kind", kind)
		return
	}
	// Sorted: a batch then holds neighbours (one namespace's objects), run after run.
	slices.Sort(names)
	var st batchStats
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.cfg.Workers)
	for chunk := range slices.Chunk(names, size) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.applyBatch(ctx, r, chunk, &st)
		})
	}
	wg.Wait()
	c.metrics.startupDone(kind, time.Since(start))
	c.log.Info("Start-up batch", "kind", kind, "keys", len(names), "changed", st.changed, "failed", st.failed,
		"transactions", st.txns, "took", time.Since(start).Round(time.Millisecond))
}

// batchItem is one key of a start-up batch: what it wants and the plan that gets it there.
type batchItem struct {
	key  nb.Key
	want desire
	plan *nb.Plan
}

// applyBatch converges the keys names of r in one transaction: it diffs every key against
// the NB cache, applies all the plans together, and then runs every key's follow-up.
func (c *Controller) applyBatch(ctx context.Context, r reconciler, names []string, st *batchStats) {
	kind := r.kind()
	own := make(map[nb.Key]bool, len(names))
	for _, n := range names {
		own[nb.Key{Kind: kind, Name: n}] = true
	}
	view := &memoView{nbView: c.view, own: own, owned: map[nb.Key][]model.Model{}}
	var items []batchItem
	failed := 0
	for _, n := range names {
		key := nb.Key{Kind: kind, Name: n}
		// One key's desired state is bounded as its sync in the queue would be.
		dctx, cancel := c.bounded(ctx)
		d, err := r.desired(dctx, n)
		cancel()
		if err == nil && len(d.syncFirst) > 0 {
			// Only missing keys are named: they failed in their own step.
			err = &waitingFor{keys: d.syncFirst}
		}
		var plan *nb.Plan
		if err == nil && !d.keep {
			plan, err = nb.Diff(ctx, view, key, d.rows)
		}
		if err != nil {
			c.leaveToQueue(key, err)
			failed++
			continue
		}
		if !d.keep {
			items = append(items, batchItem{key: key, want: d, plan: plan})
		}
	}
	var plans []*nb.Plan
	var changed []nb.Key
	for _, it := range items {
		if !it.plan.Empty() {
			plans = append(plans, it.plan)
			changed = append(changed, it.key)
		}
	}
	applied := true
	if len(plans) > 0 {
		if err := c.transactPlans(ctx, plans); err != nil {
			c.log.Error(err, "Start-up batch failed; the work queue syncs its keys", "kind", kind, "keys", len(changed))
			for _, k := range changed {
				c.queue.Add(k)
			}
			applied = false
			st.add(0, failed+len(changed), 0)
		} else {
			st.add(len(plans), failed, 1)
		}
	} else {
		st.add(0, failed, 0)
	}
	for _, it := range items {
		if applied || it.plan.Empty() {
			c.followUp(it.key, it.want, it.plan)
		}
	}
}

func (st *batchStats) add(changed, failed, txns int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.changed += changed
	st.failed += failed
	st.txns += txns
}

// transactPlans applies plans in one transaction.
func (c *Controller) transactPlans(ctx context.Context, plans []*nb.Plan) error {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if _, err := nb.Merge(plans...).Apply(ctx, c.nb); err != nil {
		return fmt.Errorf("start-up batch of %d keys: %w", len(plans), err)
	}
	return nil
}

// leaveToQueue logs why key failed in the start-up batch and enqueues it: the work queue
// retries it. A key waiting for another (reconcile.Waiting) is logged quietly, as the queue
// would.
func (c *Controller) leaveToQueue(key nb.Key, err error) {
	if w, ok := errors.AsType[reconcile.Waiting](err); ok {
		c.log.V(2).Info("Start-up batch: waiting; left to the work queue", "key", key.String(), "for", w.Waiting())
	} else {
		c.log.Error(err, "Start-up batch: left to the work queue", "key", key.String())
	}
	c.queue.Add(key)
}

// waitingFor says a key's rows name keys whose rows do not exist yet.
type waitingFor struct{ keys []nb.Key }

func (e *waitingFor) Error() string { return "waiting for " + e.Waiting() }

func (e *waitingFor) Waiting() string {
	s := make([]string, len(e.keys))
	for i, k := range e.keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

// memoView remembers the rows of owners outside the batch (the Cluster, the Nodes, shared
// peers), which many keys of a batch look up as parents or referrers; within one batch they
// do not change. The batch's own keys are always read afresh.
type memoView struct {
	nbView
	own   map[nb.Key]bool
	owned map[nb.Key][]model.Model
}

func (v *memoView) Owned(ctx context.Context, k nb.Key) ([]model.Model, error) {
	if v.own[k] {
		return v.nbView.Owned(ctx, k)
	}
	if rows, ok := v.owned[k]; ok {
		return rows, nil
	}
	rows, err := v.nbView.Owned(ctx, k)
	if err == nil {
		v.owned[k] = rows
	}
	return rows, err
}
