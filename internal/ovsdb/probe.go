package ovsdb

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
)

// probed is the client New returns: libovsdb's, with an inactivity probe of our own and a
// bound on each transaction's wait for its reply.
//
// libovsdb v0.7.0's own probe (WithInactivityCheck) cannot be used. Every transaction
// reports its reply to the probe's goroutine on an unbuffered channel while holding the
// connection's read lock; when the probe gives up on the server it takes the write lock to
// disconnect, and then closes that channel. A reply that arrives as the probe gives up
// therefore either waits forever for the probe, which waits for the lock, or panics on the
// closed channel (TestTransactAnsweredAfterProbeGaveUp).
type probed struct {
	client.Client
	transactTimeout time.Duration
	stop            chan struct{}
	stopOnce        sync.Once
}

func (cfg Config) transactTimeout() time.Duration {
	if cfg.TransactTimeout > 0 {
		return cfg.TransactTimeout
	}
	return DefaultTransactTimeout
}

// newProbed wraps c; with interval > 0 it echoes the server every interval and disconnects
// (libovsdb then reconnects) when an echo is not answered within interval.
func newProbed(c client.Client, interval, transactTimeout time.Duration, logger logr.Logger) *probed {
	p := &probed{Client: c, transactTimeout: transactTimeout, stop: make(chan struct{})}
	if interval > 0 {
		go p.probe(interval, logger)
	}
	return p
}

func (p *probed) probe(interval time.Duration, logger logr.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if !p.Connected() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		err := p.Echo(ctx)
		cancel()
		select {
		case <-p.stop:
			return
		default:
		}
		if err != nil && p.Connected() {
			logger.Info("server did not answer the inactivity probe; reconnecting", "endpoint", p.CurrentEndpoint(), "probe", interval, "error", err.Error())
			// Waits for the transactions in flight, each bounded by transactTimeout.
			p.Disconnect()
		}
	}
}

// Transact waits for a connection as long as ctx allows, then for the reply at most
// transactTimeout.
func (p *probed) Transact(ctx context.Context, ops ...libovsdb.Operation) ([]libovsdb.OperationResult, error) {
	if !p.Connected() {
		t := time.NewTicker(50 * time.Millisecond)
		for !p.Connected() {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("%w: while waiting for a connection", ctx.Err())
			case <-t.C:
			}
		}
		t.Stop()
	}
	ctx, cancel := context.WithTimeout(ctx, p.transactTimeout)
	defer cancel()
	return p.Client.Transact(ctx, ops...)
}

// Close stops the probe and closes the client.
func (p *probed) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.Client.Close()
}
