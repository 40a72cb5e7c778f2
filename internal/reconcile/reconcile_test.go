package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type waitingErr struct{}

func (waitingErr) Error() string   { return "parent missing" }
func (waitingErr) Waiting() string { return "parent" }

// A key whose sync fails is synced again until it succeeds; the other keys are synced once;
// Run returns once ctx ends.
func TestLoopRetriesFailedKeys(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	sync := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		switch {
		case key == "flaky" && calls[key] == 1:
			return errors.New("transient")
		case key == "waits" && calls[key] < 3:
			return waitingErr{}
		}
		if calls["flaky"] == 2 && calls["waits"] == 3 && calls["once"] == 1 {
			close(done)
		}
		return nil
	}
	l := New("test", sync, testr.New(t), Options{Workers: 2, MinRetry: time.Millisecond, MaxRetry: 10 * time.Millisecond})
	for _, k := range []string{"once", "flaky", "waits"} {
		l.Add(k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { l.Run(ctx); close(ran) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		t.Fatalf("keys not converged: %v", calls)
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["once"] != 1 || calls["flaky"] != 2 || calls["waits"] != 3 {
		t.Errorf("calls %v, want once 1, flaky 2, waits 3", calls)
	}
}

// Keys added while the loop waits are merged: a burst of events for one key is one sync.
func TestLoopMergesAKeysEvents(t *testing.T) {
	l := New("test", func(context.Context, string) error { return nil }, testr.New(t), Options{})
	for range 5 {
		l.Add("k")
	}
	if l.Len() != 1 {
		t.Errorf("queue holds %d keys after five Adds of one, want 1", l.Len())
	}
}

func TestStripManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := StripManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.ManagedFields != nil || got.Labels["a"] != "b" {
		t.Errorf("after the transform: managedFields %v, labels %v", got.ManagedFields, got.Labels)
	}
	// A tombstone or anything else passes through untouched.
	if out, err := StripManagedFields("x"); err != nil || out != "x" {
		t.Errorf("StripManagedFields(string) = %v, %v", out, err)
	}
}

// TestLoopBoundsASync: a sync that would wait forever (a database that stopped answering)
// is ended by the loop's SyncTimeout and retried, and the other keys go on meanwhile.
func TestLoopBoundsASync(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	sync := func(ctx context.Context, key string) error {
		mu.Lock()
		calls[key]++
		n := calls[key]
		mu.Unlock()
		if key == "hangs" && n == 1 {
			<-ctx.Done() // only the loop's deadline can end this
			return ctx.Err()
		}
		if key == "hangs" {
			close(done)
		}
		return nil
	}
	l := New("test", sync, testr.New(t), Options{Workers: 1, MinRetry: time.Millisecond, SyncTimeout: 50 * time.Millisecond})
	l.Add("hangs")
	l.Add("other")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { l.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the hung sync was never ended and retried")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["other"] != 1 {
		t.Errorf("the other key was synced %d times, want 1", calls["other"])
	}
}

// TestLoopObserves: Observe hears every sync, with a wait that counts from the first Add of
// the events the sync answers (a failed attempt's retry included), and Stalled tells a
// turning loop from one whose workers are stuck.
func TestLoopObserves(t *testing.T) {
	type seen struct {
		key    any
		waited time.Duration
		err    error
	}
	var mu sync.Mutex
	var got []seen
	release := make(chan struct{})
	calls := 0
	sync := func(ctx context.Context, key string) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch {
		case key == "stuck":
			<-release
		case n == 1:
			return errors.New("first attempt fails")
		}
		return nil
	}
	l := New("test", sync, testr.New(t), Options{Workers: 1, MinRetry: 20 * time.Millisecond,
		Observe: func(key any, waited, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{key, waited, err})
		}})
	l.Add("k")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { l.Run(ctx); close(ran) }()
	defer func() { cancel(); close(release); <-ran }()
	poll.Eventually(t, ctx, "two syncs of k observed", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 2, fmt.Errorf("%d observed", len(got))
	})
	mu.Lock()
	first, second := got[0], got[1]
	mu.Unlock()
	if first.key != "k" || first.err == nil || second.err != nil {
		t.Fatalf("observed %+v then %+v, want a failure then a success of k", first, second)
	}
	// The retry waited at least its backoff after the failure: its wait includes both.
	if second.waited < first.waited+20*time.Millisecond {
		t.Errorf("the retry's wait %v does not count from the first Add (the failed attempt waited %v)", second.waited, first.waited)
	}
	if err := l.Stalled(time.Hour); err != nil {
		t.Errorf("a loop that turns: %v", err)
	}
	l.Add("stuck")
	l.Add("behind")
	poll.Eventually(t, ctx, "Stalled to report the stuck worker", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		err := l.Stalled(50 * time.Millisecond)
		return err != nil, errors.New("not reported")
	})
}

// TestLoopNotStalledBeforeRun: keys added before Run wait for the daemon's start-up, which
// is not a stall (a liveness probe would restart every slow start-up); once Run turns, a
// worker stuck past the bound is one.
func TestLoopNotStalledBeforeRun(t *testing.T) {
	release := make(chan struct{})
	l := New("test", func(ctx context.Context, key string) error {
		<-release
		return nil
	}, testr.New(t), Options{Workers: 1})
	l.Add("a")
	l.Add("b")
	time.Sleep(time.Millisecond) // past the bound below
	if err := l.Stalled(time.Nanosecond); err != nil {
		t.Errorf("before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { l.Run(ctx); close(ran) }()
	defer func() { cancel(); close(release); <-ran }()
	poll.Eventually(t, ctx, "Stalled to report the stuck worker", 10*time.Second, time.Millisecond, func() (bool, error) {
		return l.Stalled(10*time.Millisecond) != nil, errors.New("not reported")
	})
}
