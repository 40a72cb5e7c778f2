package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// Start-up batches. At start-up thousands of Services or NetworkPolicies would each cost one
// NB transaction (and a northd recompute); the start-up paths diff many keys and apply their
// plans in one transaction instead. They are an optimisation only: the work queue syncs
// every key afterwards and finds nothing left, and a key whose plan fails here is left to it.
// Single changes later stay one key, one small transaction.

// batchItem is one owner's desired rows in a start-up batch.
type batchItem struct {
	key  nb.Key
	rows []nb.Row
}

// applyBatch diffs every item against the NB cache and applies all the plans in one
// transaction. It returns how many keys had something to change. Items whose diff fails
// are skipped (the work queue retries them); a failed transaction fails the whole batch.
func (c *Controller) applyBatch(ctx context.Context, items []batchItem) (int, error) {
	own := make(map[nb.Key]bool, len(items))
	for _, it := range items {
		own[it.key] = true
	}
	view := &memoView{nbView: c.view, own: own, owned: map[nb.Key][]model.Model{}}
	var plans []*nb.Plan
	for _, it := range items {
		plan, err := nb.Diff(ctx, view, it.key, it.rows)
		if err != nil || plan.Empty() {
			continue
		}
		plans = append(plans, plan)
	}
	if len(plans) == 0 {
		return 0, nil
	}
	ops, err := nb.Merge(plans...).Ops(c.nb)
	if err != nil {
		return 0, err
	}
	results, err := ovsdb.Transact(ctx, c.nb, ops...)
	if err == nil {
		err = nb.CheckApplied(ops, results)
	}
	if err != nil {
		return 0, errors.Join(fmt.Errorf("start-up batch of %d keys", len(items)), err)
	}
	return len(plans), nil
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
