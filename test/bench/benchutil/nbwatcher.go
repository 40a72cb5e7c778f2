package benchutil

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// NBWatcher is a benchmark's own client of the NB, as an operator's would be. From its cache's
// events it counts the rows the NB reports changed, remembers when each table last changed,
// and tells when a row a benchmark waits for arrives: event-driven, so that measuring costs
// the master and the NB no CPU.
type NBWatcher struct {
	// Client is the libovsdb client; List from its cache, or add event handlers of your own.
	Client client.Client

	changes atomic.Int64
	mu      sync.Mutex
	last    map[string]time.Time // table -> last add, update or delete
	probe   func(table string, m model.Model) bool
	hit     chan time.Time
}

// NewNBWatcher connects to the NB at remote and monitors tables (models such as
// &nbdb.LoadBalancer{}). Rows already there when it connects are not counted as changes.
func NewNBWatcher(ctx context.Context, remote string, tables ...model.Model) (*NBWatcher, error) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	var ts []ovsdb.Table
	for _, m := range tables {
		ts = append(ts, ovsdb.Table{Model: m})
	}
	c, err := ovsdb.New(ctx, dbModel, ovsdb.Config{Remotes: remote, Tables: ts})
	if err != nil {
		return nil, fmt.Errorf("NB watcher: %w", err)
	}
	w := &NBWatcher{Client: c, last: map[string]time.Time{}}
	c.Cache().AddEventHandler(w)
	return w, nil
}

// Close disconnects.
func (w *NBWatcher) Close() { w.Client.Close() }

// OnAdd, OnUpdate and OnDelete are the cache's events.
func (w *NBWatcher) OnAdd(table string, m model.Model)       { w.event(table, m) }
func (w *NBWatcher) OnUpdate(table string, _, m model.Model) { w.event(table, m) }
func (w *NBWatcher) OnDelete(table string, _ model.Model)    { w.event(table, nil) }

func (w *NBWatcher) event(table string, m model.Model) {
	now := time.Now()
	w.changes.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[table] = now
	if m != nil && w.probe != nil && w.probe(table, m) {
		w.hit <- now
		w.probe = nil
	}
}

// Changes is the number of rows the NB has reported added, updated or deleted so far.
func (w *NBWatcher) Changes() int64 { return w.changes.Load() }

// LastChange is when the last of tables (table names, such as nbdb.ACLTable) last changed;
// the zero time if none has.
func (w *NBWatcher) LastChange(tables ...string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, t := range tables {
		if w.last[t].After(last) {
			last = w.last[t]
		}
	}
	return last
}

// Expect arms probe, replacing any armed before: the first row added or updated afterwards
// that satisfies it sends the time it arrived on the returned channel. Arm it before making
// the change, or the row may arrive first.
func (w *NBWatcher) Expect(probe func(table string, m model.Model) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.probe, w.hit = probe, ch
	w.mu.Unlock()
	return ch
}

// Await returns the time ch (from Expect) delivers, or an error after timeout or when ctx ends.
func Await(ctx context.Context, what string, ch <-chan time.Time, timeout time.Duration) (time.Time, error) {
	select {
	case t := <-ch:
		return t, nil
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("%s: not seen in %v", what, timeout)
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// Count lists a table from the cache into list (a pointer to a slice of models, such as
// *[]nbdb.ACL) and returns its length; 0 if the list fails.
func (w *NBWatcher) Count(ctx context.Context, list any) int {
	if err := w.Client.List(ctx, list); err != nil {
		return 0
	}
	return reflect.ValueOf(list).Elem().Len()
}
