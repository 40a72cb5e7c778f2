package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/nbsync"
	"github.com/ovn-transparent/ovn-transparent/master/owner"
)

// bulkBatch is how many Services one start-up transaction carries.
const bulkBatch = 500

// bulkSyncServices is the start-up fast path for Services: it diffs every Service against
// the NB cache and applies the plans in a few large transactions instead of one per
// Service. A cold start of thousands of Services is otherwise bounded by the NB's cost per
// transaction (and northd recomputing after each). It is an optimisation only: every key is
// synced again afterwards by the ordinary path, which finds nothing left to do, and a
// Service whose plan fails here is simply left to it.
func (c *Controller) bulkSyncServices(ctx context.Context) {
	start := time.Now()
	// The load balancer group first: every cluster load balancer hangs in it.
	cluster := owner.Key{Kind: owner.Cluster, Name: owner.ClusterName}
	if err := c.sync(ctx, cluster); err != nil {
		c.log.V(2).Info("Bulk start-up skipped: cluster not ready", "err", err)
		return
	}
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	keys := make([]string, 0, len(svcs))
	for _, s := range svcs {
		keys = append(keys, s.Namespace+"/"+s.Name)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, failed := 0, 0
	sem := make(chan struct{}, c.cfg.Workers)
	for i := 0; i < len(keys); i += bulkBatch {
		batch := keys[i:min(i+bulkBatch, len(keys))]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := c.bulkApply(ctx, batch)
			mu.Lock()
			defer mu.Unlock()
			applied += n
			if err != nil {
				failed += len(batch)
				c.log.Error(err, "Bulk start-up batch failed; its Services are synced one by one")
			}
		}()
	}
	wg.Wait()
	c.log.Info("Bulk start-up of Services", "services", len(keys), "changed", applied, "failedBatches", failed/bulkBatch, "took", time.Since(start))
}

// bulkApply diffs the Services of keys and applies their plans in one transaction. It
// returns how many Services had something to change.
func (c *Controller) bulkApply(ctx context.Context, keys []string) (int, error) {
	var plans []*nbsync.Plan
	view := &memoView{nbView: c.view, owned: map[owner.Key][]model.Model{}}
	for _, k := range keys {
		rows, err := c.serviceRows(k)
		if err != nil {
			continue
		}
		plan, err := nbsync.Diff(ctx, view, owner.Key{Kind: owner.Service, Name: k}, rows)
		if err != nil || plan.Empty() {
			continue
		}
		plans = append(plans, plan)
	}
	if len(plans) == 0 {
		return 0, nil
	}
	ops, err := nbsync.Merge(plans...).Ops(c.nb)
	if err != nil {
		return 0, err
	}
	results, err := ovsdb.Transact(ctx, c.nb, ops...)
	if err == nil {
		err = nbsync.CheckApplied(ops, results)
	}
	if err != nil {
		return 0, errors.Join(errors.New("bulk service transaction"), err)
	}
	return len(plans), nil
}

// memoView remembers the rows of the Cluster and the Nodes, which every Service of a batch
// looks up to find the rows that must reference its load balancers; within one batch they
// do not change.
type memoView struct {
	nbView
	owned map[owner.Key][]model.Model
}

func (v *memoView) Owned(ctx context.Context, k owner.Key) ([]model.Model, error) {
	if k.Kind == owner.Service {
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
