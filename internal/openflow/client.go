package openflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bridge is the flow table of one switch as a declarative owner sees it. *Client implements
// it; fakes keep their flows in struct fields.
type Bridge interface {
	// Sync makes the switch's flows that carry cookie exactly flows (their Cookie fields
	// are set to cookie; a different non-zero one is an error) and leaves every other flow
	// alone. It is idempotent: when the switch already has those flows it sends no
	// flow-mod and no counter is reset. A flow whose table, priority and match equal one of
	// another cookie replaces that flow (OVS keeps one flow per table, priority and match).
	//
	// The set is remembered and installed again whenever the connection comes back (an
	// ovs-vswitchd restart loses all flows), even if this call returns an error; Sync with
	// no flows removes them all and stops that. Invalid flows are rejected before anything
	// is remembered or sent. Errors from the switch are *FlowError values, joined, naming
	// each rejected flow; on OpenFlow 1.4 nothing is then changed (one atomic bundle), on
	// 1.3 the flow-mods before and after the rejected one are applied.
	Sync(ctx context.Context, cookie uint64, flows []Flow) error
	// Dump returns the switch's flows that carry cookie, from all tables, as the switch
	// reports them; an action or match this package cannot model comes back as RawAction
	// or Match.Raw. Waits for a connection until ctx ends.
	Dump(ctx context.Context, cookie uint64) ([]Flow, error)
}

// Options configure a Client. The zero value is usable.
type Options struct {
	// Logf receives connection events and errors of the background re-sync; default none.
	Logf func(format string, args ...any)
	// MaxVersion is the highest version offered: OpenFlow14 (the default) or OpenFlow13,
	// which turns bundles off.
	MaxVersion Version
	// ProbeInterval is the idle time after which an echo request is sent; the connection
	// is dropped after twice that without any message. Default 5s; negative disables.
	ProbeInterval time.Duration
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("openflow: client closed")

const (
	minBackoff       = 50 * time.Millisecond
	maxBackoff       = 2 * time.Second
	handshakeTimeout = 10 * time.Second
)

// Client keeps one connection to a switch, reconnecting as needed, and owns flow sets by
// cookie. Its methods are safe for concurrent use; applies are serialised.
type Client struct {
	target string
	opts   Options

	applyMu sync.Mutex // one dump-diff-apply at a time

	mu      sync.Mutex
	desired map[uint64][]Flow
	conn    *conn
	ready   chan struct{} // closed while conn is set
	closed  bool

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection loop has ended

	flowMods atomic.Int64 // flow-mods sent, for tests and metrics
}

var _ Bridge = (*Client)(nil)

// New starts a client for target: "unix:PATH" (OVS's bridge management socket,
// <OVS_RUNDIR>/<bridge>.mgmt; on Windows the named pipe OVS makes of that path) or
// "tcp:HOST:PORT" (a bridge's ptcp: controller). It connects in the background, retrying
// until Close; Sync and Dump wait for the connection.
func New(target string, opts Options) (*Client, error) {
	if _, _, err := parseTarget(target); err != nil {
		return nil, err
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.MaxVersion == 0 {
		opts.MaxVersion = OpenFlow14
	}
	if opts.MaxVersion != OpenFlow13 && opts.MaxVersion != OpenFlow14 {
		return nil, fmt.Errorf("openflow: MaxVersion %v not supported", opts.MaxVersion)
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		target: target, opts: opts, desired: map[uint64][]Flow{},
		ready: make(chan struct{}), ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
	go c.run()
	return c, nil
}

// Close drops the connection and stops reconnecting. The switch keeps its flows.
// Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	<-c.done
	return nil
}

// Version is the negotiated OpenFlow version, 0 while disconnected.
func (c *Client) Version() Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0
	}
	return c.conn.version
}

// run connects, re-installs every remembered flow set, and waits for the connection to end,
// forever until Close.
func (c *Client) run() {
	defer close(c.done)
	backoff := minBackoff
	var lastErr string
	for c.ctx.Err() == nil {
		cn, err := c.connect()
		if err != nil {
			if msg := err.Error(); msg != lastErr && c.ctx.Err() == nil {
				c.opts.Logf("openflow: %s: %v (retrying)", c.target, err)
				lastErr = msg
			}
			select {
			case <-c.ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff, lastErr = minBackoff, ""
		c.opts.Logf("openflow: %s: connected, %v", c.target, cn.version)
		c.setConn(cn)
		go c.resyncAll(cn)
		select {
		case <-cn.done:
			c.opts.Logf("openflow: %s: disconnected: %v", c.target, cn.lost())
		case <-c.ctx.Done():
			cn.close()
		}
		c.setConn(nil)
	}
}

func (c *Client) connect() (*conn, error) {
	ctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	defer cancel()
	nc, err := dial(ctx, c.target)
	if err != nil {
		return nil, err
	}
	cn, err := handshake(ctx, nc, c.opts.MaxVersion, c.opts.ProbeInterval)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return cn, nil
}

func (c *Client) setConn(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = cn
	if cn != nil {
		close(c.ready)
	} else {
		c.ready = make(chan struct{})
	}
}

// resyncAll installs every remembered flow set on a new connection: after an ovs-vswitchd
// restart the bridge starts with no flows but its default NORMAL one.
func (c *Client) resyncAll(cn *conn) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go func() {
		select {
		case <-cn.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.mu.Lock()
	cookies := slices.Sorted(maps.Keys(c.desired))
	c.mu.Unlock()
	for _, cookie := range cookies {
		c.applyMu.Lock()
		err := c.apply(ctx, cn, cookie)
		c.applyMu.Unlock()
		if err != nil && ctx.Err() == nil {
			c.opts.Logf("openflow: %s: re-installing cookie 0x%x: %v", c.target, cookie, err)
		}
	}
}

// Sync implements Bridge.
func (c *Client) Sync(ctx context.Context, cookie uint64, flows []Flow) error {
	if cookie == 0 || cookie == ^uint64(0) {
		// 0 is every unowned flow's cookie (ovs-ofctl's default, the bridge's NORMAL flow);
		// all ones is reserved by OpenFlow for "no cookie" in flow-mods.
		return fmt.Errorf("openflow: cookie 0x%x cannot own flows", cookie)
	}
	want := make([]Flow, len(flows))
	seen := map[string]int{}
	for i, f := range flows {
		if f.Cookie != 0 && f.Cookie != cookie {
			return fmt.Errorf("openflow: flow %d (%s) has cookie 0x%x, syncing 0x%x", i, f.String(), f.Cookie, cookie)
		}
		if err := f.Validate(); err != nil {
			return fmt.Errorf("openflow: flow %d (%s): %w", i, f.String(), err)
		}
		if j, dup := seen[f.key()]; dup {
			return fmt.Errorf("openflow: flows %d and %d have the same table, priority and match: %s", j, i, f.key())
		}
		seen[f.key()] = i
		f.Cookie = cookie
		want[i] = f
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.desired[cookie] = want
	c.mu.Unlock()
	err := c.withConn(ctx, func(cn *conn) error { return c.apply(ctx, cn, cookie) })
	if err != nil {
		return fmt.Errorf("openflow: sync cookie 0x%x: %w", cookie, err)
	}
	return nil
}

// Dump implements Bridge.
func (c *Client) Dump(ctx context.Context, cookie uint64) ([]Flow, error) {
	var flows []Flow
	err := c.withConn(ctx, func(cn *conn) (err error) {
		flows, err = cn.dump(ctx, cookie)
		return err
	})
	return flows, err
}

// withConn runs fn on the current connection under applyMu, waiting for one and trying again
// on the next when the connection is lost underneath, until ctx ends.
func (c *Client) withConn(ctx context.Context, fn func(*conn) error) error {
	for {
		c.mu.Lock()
		cn, ready, closed := c.conn, c.ready, c.closed
		c.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if cn == nil {
			select {
			case <-ready:
				continue
			case <-c.ctx.Done():
				return ErrClosed
			case <-ctx.Done():
				return fmt.Errorf("openflow: %s: not connected: %w", c.target, ctx.Err())
			}
		}
		c.applyMu.Lock()
		err := fn(cn)
		c.applyMu.Unlock()
		if !errors.Is(err, errConnLost) {
			return err
		}
		select {
		case <-cn.done: // wait for run to notice, then for the next connection
		case <-ctx.Done():
			return err
		}
		for {
			c.mu.Lock()
			same := c.conn == cn
			c.mu.Unlock()
			if !same {
				break
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// apply makes the flows with cookie on cn what is desired now.
func (c *Client) apply(ctx context.Context, cn *conn, cookie uint64) error {
	c.mu.Lock()
	want := c.desired[cookie]
	c.mu.Unlock()
	have, err := cn.dump(ctx, cookie)
	if err != nil {
		return err
	}
	mods := diff(want, have)
	if len(mods) == 0 {
		return nil
	}
	c.flowMods.Add(int64(len(mods)))
	return cn.apply(ctx, mods)
}
