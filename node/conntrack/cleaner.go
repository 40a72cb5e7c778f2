package conntrack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
)

// The cleaner's one queue key: the node's UDP frontends are checked together, from one dump.
const key = "conntrack"

// recheck are the delays after a table change at which the cleaner looks again: the node
// sees an EndpointSlice change before the master's load balancer row reaches this node's
// ovn-controller, and a client's datagram in between makes a new entry to the old backend.
// resync is the sweep when nothing changes, for entries made while the data plane lagged
// longer than that.
var recheck = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

const resync = 2 * time.Minute

// Cleaner deletes the stale entries (Table.Stale) of the latest table it was given. A
// failed sync is retried with backoff; the Services' other work never waits for it.
type Cleaner struct {
	dp   Datapath
	log  logr.Logger
	loop *reconcile.Loop[string]

	mu      sync.Mutex
	table   Table     // nil until the first Set: nothing is stale before the caches are full
	changed time.Time // of the table, for the rechecks
}

// NewCleaner returns a cleaner of dp's entries; nothing happens until Run and Set.
func NewCleaner(dp Datapath, log logr.Logger) *Cleaner {
	c := &Cleaner{dp: dp, log: log}
	c.loop = reconcile.New("node-conntrack", func(ctx context.Context, _ string) error { return c.sync(ctx) }, log, reconcile.Options{})
	return c
}

// Set makes t the table; it returns at once. The same table again is a no-op.
func (c *Cleaner) Set(t Table) {
	c.mu.Lock()
	same := c.table != nil && c.table.Equal(t)
	if !same {
		c.table, c.changed = t, time.Now()
	}
	c.mu.Unlock()
	if !same {
		c.loop.Add(key)
	}
}

// Run cleans until ctx ends.
func (c *Cleaner) Run(ctx context.Context) { c.loop.Run(ctx) }

func (c *Cleaner) sync(ctx context.Context) error {
	c.mu.Lock()
	t, since := c.table, time.Since(c.changed)
	c.mu.Unlock()
	if len(t) == 0 {
		return nil
	}
	// The next look: the first recheck still ahead, else the resync. One at a time, since
	// the queue keeps only the earliest of a key's delayed adds.
	next := resync
	for _, d := range recheck {
		if d > since {
			next = d - since
			break
		}
	}
	defer c.loop.AddAfter(key, next)
	conns, err := c.dp.Dump(ctx)
	if err != nil && conns == nil {
		return fmt.Errorf("reading the datapath's conntrack entries: %w", err)
	}
	if err != nil {
		// Entries it could not read are left alone; the others are cleaned.
		c.log.Error(err, "conntrack dump")
	}
	var errs []error
	for svc, stale := range t.Stale(conns) {
		deleted := 0
		for _, conn := range stale {
			if err := c.dp.Delete(ctx, conn); err != nil {
				errs = append(errs, fmt.Errorf("service %s: deleting the conntrack entry %s: %w", svc, conn, err))
				continue
			}
			deleted++
		}
		if deleted > 0 {
			c.log.V(2).Info("deleted stale conntrack entries", "service", svc, "entries", deleted)
		}
	}
	return errors.Join(errs...)
}
