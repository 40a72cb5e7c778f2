package conntrack

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// lateDatapath is a datapath whose stale entry appears only at its third dump: a client's
// datagram that reached the old backend because this node's ovn-controller had not yet
// installed the load balancer without it.
type lateDatapath struct {
	mu      sync.Mutex
	dumps   int
	conns   []Conn
	deleted []Conn
}

func (d *lateDatapath) Dump(context.Context) ([]Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dumps++
	if d.dumps == 3 {
		d.conns = append(d.conns, Conn{Proto: 17, Zone: 7, OrigSrc: ap("10.244.0.3:40000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.5:8080")})
	}
	return slices.Clone(d.conns), nil
}

func (d *lateDatapath) Delete(_ context.Context, c Conn) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns = slices.DeleteFunc(d.conns, func(x Conn) bool { return x == c })
	d.deleted = append(d.deleted, c)
	return nil
}

func (d *lateDatapath) gone() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dumps >= 3 && len(d.deleted) == 1 && len(d.conns) == 0
}

// TestCleanerLooksAgainAfterAChange: one table change, and an entry that turns stale only
// after the first recheck is still deleted, without another change (the rechecks follow one
// another; the queue kept only the first of them).
func TestCleanerLooksAgainAfterAChange(t *testing.T) {
	// The rechecks' order, not their length, is under test: shorter ones keep the unit tier
	// fast (the real ones, 1 s and 5 s, would make the test wait 6 s).
	defer func(r []time.Duration) { recheck = r }(recheck)
	recheck = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, 30 * time.Second}
	d := &lateDatapath{}
	c := NewCleaner(d, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { c.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }() // before recheck is put back
	c.Set(Table{{17, ap("10.96.0.10:53")}: {Service: "ns/dns", Backends: []netip.AddrPort{ap("10.244.1.6:8080")}}})
	poll.Eventually(t, ctx, "the late stale entry deleted", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		return d.gone(), nil
	})
}
