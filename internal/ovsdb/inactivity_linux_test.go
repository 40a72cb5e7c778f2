package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// TestInactivityProbeDropsHungServer: a server that stops answering (SIGSTOP: its socket
// stays open, as behind a half-open TCP connection) is dropped by the inactivity probe, and
// the client is back with the server once it answers again (audit M4).
func TestInactivityProbeDropsHungServer(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	c := newClient(t, s.unixRemote(), Config{Tables: allTables(), InactivityProbe: 200 * time.Millisecond, ReconnectTimeout: time.Second})
	insertSwitches(t, c, &testLS{Name: "before"})

	thaw := s.freeze()
	// A hung server answers no echo: the client must notice, although nothing was closed.
	poll.Eventually(t, context.Background(), "the client to drop the hung server", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		return c.CurrentEndpoint() == "", errors.New("client still on the hung server")
	})
	thaw()
	insertSwitches(t, c, &testLS{Name: "after"})
	poll.Eventually(t, context.Background(), "both switches in the cache", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		got := names(cachedSwitches(t, c))
		return reflect.DeepEqual(got, []string{"after", "before"}), fmt.Errorf("switches %q", got)
	})
}

// TestTransactAnsweredAfterProbeGaveUp: a transaction is in flight when the server stops
// answering; the inactivity probe gives up on the server while it waits, and then the server
// answers after all. The transaction returns (committed or not) and the client reconnects.
// With libovsdb v0.7.0's own probe both hung for good: its probe waited for the connection's
// lock to disconnect while the transaction, holding that lock, waited to report its reply to
// the probe.
func TestTransactAnsweredAfterProbeGaveUp(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Not newClient: on the old code Close would hang the test's clean-up too.
	c, err := New(ctx, testNBModel(t), Config{Remotes: s.unixRemote(), Tables: allTables(), Logger: testLogger(t),
		InactivityProbe: 200 * time.Millisecond, ReconnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	insertSwitches(t, c, &testLS{Name: "before"})

	thaw := s.freeze()
	done := make(chan error, 1)
	go func() {
		ops, err := c.Create(&testLS{Name: "during"})
		if err == nil {
			_, err = Transact(ctx, c, ops...)
		}
		done <- err
	}()
	// Long enough for the probe to send its echo, see it unanswered and give up.
	time.Sleep(2 * time.Second)
	thaw()
	select {
	case err := <-done:
		t.Logf("the transaction in flight returned: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the transaction in flight never returned after the server answered again")
	}
	insertSwitches(t, c, &testLS{Name: "after"})
	poll.Eventually(t, ctx, "the switch made afterwards in the cache", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		got := names(cachedSwitches(t, c))
		return slices.Contains(got, "after"), fmt.Errorf("switches %q", got)
	})
	c.Close()
}

// TestTransactTimeoutOnHungServer: a server that hangs with a transaction in flight and
// never answers again. The transaction fails after TransactTimeout, and the client leaves
// the server (the probe could not disconnect while the transaction held the connection).
func TestTransactTimeoutOnHungServer(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	c := newClient(t, s.unixRemote(), Config{Tables: allTables(), InactivityProbe: 200 * time.Millisecond, TransactTimeout: time.Second})
	s.freeze()
	ops, err := c.Create(&testLS{Name: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	// The caller's own context would wait a minute: the client's bound must end it first.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Transact(ctx, c, ops...); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("transaction on a hung server: %v (caller's context: %v), want the client's timeout", err, ctx.Err())
	}
	poll.Eventually(t, ctx, "the client to drop the hung server", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		return c.CurrentEndpoint() == "", errors.New("client still on the hung server")
	})
}

// freeze stops the running server with SIGSTOP (its sockets stay open, as behind a
// half-open TCP connection) and returns the function that lets it go on; the test's
// clean-up calls that too, if the test did not.
func (s *server) freeze() (thaw func()) {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	var once sync.Once
	thaw = func() { once.Do(func() { s.signal(syscall.SIGCONT) }) }
	s.t.Cleanup(thaw)
	return thaw
}
