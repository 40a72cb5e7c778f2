package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// bulkBatch is how many Services one start-up transaction carries.
const bulkBatch = 500

// bulkSyncServices is the start-up fast path for Services (see batch.go): batches of
// bulkBatch Services, several batches diffed in parallel.
func (c *Controller) bulkSyncServices(ctx context.Context) {
	start := time.Now()
	// The load balancer group first: every cluster load balancer hangs in it.
	cluster := nb.Key{Kind: nb.Cluster, Name: nb.ClusterName}
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

// bulkApply applies the Services of keys in one start-up batch and returns how many changed.
func (c *Controller) bulkApply(ctx context.Context, keys []string) (int, error) {
	items := make([]batchItem, 0, len(keys))
	for _, k := range keys {
		rows, err := c.serviceRows(k)
		if err != nil {
			continue
		}
		items = append(items, batchItem{key: nb.Key{Kind: nb.Service, Name: k}, rows: rows})
	}
	return c.applyBatch(ctx, items)
}
