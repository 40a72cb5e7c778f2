// Package reconcile is the one work loop every controller of both binaries runs: event
// handlers Add a key and nothing else; workers take keys off a rate-limited queue and call
// the controller's sync, which rebuilds the key's desired state from caches and converges.
// A key whose sync fails is retried with backoff; a key added while it is being synced is
// synced once more afterwards, never twice at the same time (client-go's workqueue).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// SyncFunc converges one key. It returns nil when the key's state is what it should be, or
// when nothing will ever make it so (bad input, reported as an Event); an error means "retry".
type SyncFunc[K comparable] func(ctx context.Context, key K) error

// Waiting is an error that means the key waits for something another key creates (a parent
// row, a node's subnet): it is retried like any error but logged quietly.
type Waiting interface {
	error
	Waiting() string // what the key waits for
}

// Options tune a Loop; the zero value is usable.
type Options struct {
	// Workers is how many keys are synced in parallel; zero means 1.
	Workers int
	// MinRetry and MaxRetry bound the per-key exponential backoff; zero means 20 ms and 30 s.
	MinRetry, MaxRetry time.Duration
	// QPS and Burst bound how fast retried keys come back overall; zero means 100 and 500.
	QPS   float64
	Burst int
	// SyncTimeout bounds one sync: its context ends after this long, and a sync that has
	// not finished by then is retried like a failed one. Without it a database that stops
	// answering holds a worker as long as the connection lasts, and all workers soon.
	// Zero means no bound.
	SyncTimeout time.Duration
	// Observe, if set, is told about every sync, for metrics: the key, how long since the
	// first Add of the key that this sync answers (retries included: the time from an event
	// to its effect), how long the sync took, and its error.
	Observe func(key any, waited, took time.Duration, err error)
}

// Loop is a typed work queue with its workers.
type Loop[K comparable] struct {
	name    string
	sync    SyncFunc[K]
	log     logr.Logger
	workers int
	timeout time.Duration
	observe func(key any, waited, took time.Duration, err error)
	queue   workqueue.TypedRateLimitingInterface[K]

	mu    sync.Mutex
	since map[K]time.Time // first Add of each key not synced since
	// lastDone is when the last sync ended (unix nanoseconds), or Run started; zero before Run.
	lastDone atomic.Int64
}

// New returns a loop named name (in logs) that calls sync for every key added.
func New[K comparable](name string, sync SyncFunc[K], log logr.Logger, o Options) *Loop[K] {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.MinRetry <= 0 {
		o.MinRetry = 20 * time.Millisecond
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 30 * time.Second
	}
	if o.QPS <= 0 {
		o.QPS = 100
	}
	if o.Burst <= 0 {
		o.Burst = 500
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter[K](
		// Transient failures (a database unreachable, a parent not created yet) retry
		// quickly at first, and at least every MaxRetry.
		workqueue.NewTypedItemExponentialFailureRateLimiter[K](o.MinRetry, o.MaxRetry),
		&workqueue.TypedBucketRateLimiter[K]{Limiter: rate.NewLimiter(rate.Limit(o.QPS), o.Burst)},
	)
	return &Loop[K]{
		name: name, sync: sync, log: log.WithValues("loop", name), workers: o.Workers, timeout: o.SyncTimeout,
		observe: o.Observe, since: map[K]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[K]{Name: name}),
	}
}

// Add queues key for a sync. It is safe to call from any goroutine, before or during Run.
func (l *Loop[K]) Add(key K) {
	l.noteAdd(key)
	l.queue.Add(key)
}

// AddAfter queues key for a sync after d.
func (l *Loop[K]) AddAfter(key K, d time.Duration) {
	l.noteAdd(key)
	l.queue.AddAfter(key, d)
}

// noteAdd remembers when key was first added since its last sync.
func (l *Loop[K]) noteAdd(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.since[key]; !ok {
		l.since[key] = time.Now()
	}
}

// Stalled reports an error when keys wait and no sync has ended for longer than after: the
// workers are stuck (a liveness check; a sync is bounded by SyncTimeout, so after should
// be well above it). Before Run, keys wait for the daemon's start-up (informer caches,
// start-up batches), which is no stall: a liveness probe failing then would restart every
// start-up that takes longer than the probe's patience, and the next one as well.
func (l *Loop[K]) Stalled(after time.Duration) error {
	done := l.lastDone.Load()
	if done == 0 {
		return nil // not running yet
	}
	last := time.Unix(0, done)
	if n := l.queue.Len(); n > 0 && time.Since(last) > after {
		return fmt.Errorf("%s: %d keys waiting, and no sync has ended for %s", l.name, n, time.Since(last).Round(time.Second))
	}
	return nil
}

// Len is the number of keys waiting.
func (l *Loop[K]) Len() int { return l.queue.Len() }

// Run syncs keys until ctx is done, then waits for the syncs in progress and returns. Call it
// once; keys added before Run are synced first.
func (l *Loop[K]) Run(ctx context.Context) {
	l.lastDone.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
}

// ShutDown stops the queue: Run's workers return once their current key is done.
func (l *Loop[K]) ShutDown() { l.queue.ShutDown() }

func (l *Loop[K]) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	if ctx.Err() != nil {
		return false
	}
	start := time.Now()
	l.mu.Lock()
	first, ok := l.since[key]
	delete(l.since, key) // an Add from now on asks for another sync
	l.mu.Unlock()
	if !ok {
		first = start
	}
	err := l.syncOne(ctx, key)
	end := time.Now()
	l.lastDone.Store(end.UnixNano())
	if l.observe != nil {
		l.observe(key, end.Sub(first), end.Sub(start), err)
	}
	if err != nil {
		// The retry answers the same events: its wait counts from the first of them.
		l.mu.Lock()
		if _, again := l.since[key]; !again {
			l.since[key] = first
		}
		l.mu.Unlock()
	}
	if err == nil {
		l.queue.Forget(key)
		l.log.V(4).Info("Synced", "key", fmt.Sprint(key), "took", time.Since(start))
		return true
	}
	var w Waiting
	switch {
	case errors.As(err, &w):
		l.log.V(2).Info("Waiting", "key", fmt.Sprint(key), "for", w.Waiting())
	case ctx.Err() == nil:
		l.log.Error(err, "Sync failed, will retry", "key", fmt.Sprint(key), "retries", l.queue.NumRequeues(key))
	}
	l.queue.AddRateLimited(key)
	return true
}

// syncOne calls sync for key, within the loop's sync timeout if it has one.
func (l *Loop[K]) syncOne(ctx context.Context, key K) error {
	if l.timeout <= 0 {
		return l.sync(ctx, key)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.sync(ctx, key)
}
