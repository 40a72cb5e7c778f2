package openflow

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// errConnLost wraps every error caused by the connection going away; the Client then waits
// for the next connection and tries again.
var errConnLost = errors.New("openflow: connection lost")

// conn is one negotiated OpenFlow connection. A reader goroutine answers echo requests and
// routes every other message by xid to the call waiting for it; messages nobody waits for
// (OVS sends asynchronous port-status and flow-removed messages to the management socket)
// are dropped.
type conn struct {
	nc      net.Conn
	version Version

	wmu sync.Mutex // one writer at a time: messages must not interleave on the stream

	mu    sync.Mutex
	calls map[uint32]*call
	err   error         // why the connection ended; set before done is closed
	done  chan struct{} // closed when the connection has ended

	xid      atomic.Uint32
	bundleID atomic.Uint32
	lastRecv atomic.Int64 // UnixNano of the last message received
}

// call collects the messages for a set of xids. deliver never blocks the reader.
type call struct {
	mu   sync.Mutex
	msgs []msg
	wake chan struct{} // capacity 1
}

func (cl *call) deliver(m msg) {
	cl.mu.Lock()
	cl.msgs = append(cl.msgs, m)
	cl.mu.Unlock()
	select {
	case cl.wake <- struct{}{}:
	default:
	}
}

// handshake exchanges HELLOs on nc and returns the connection, its reader started. The
// highest version both sides allow wins; OVS offers only what the bridge's "protocols"
// column allows (all of 1.0-1.5 when it is empty).
func handshake(ctx context.Context, nc net.Conn, maxVersion Version, probe time.Duration) (*conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	ours := uint32(0)
	for v := OpenFlow13; v <= maxVersion; v++ {
		ours |= 1 << v
	}
	if _, err := nc.Write(helloMsg(maxVersion, ours)); err != nil {
		return nil, err
	}
	br := bufio.NewReader(nc)
	m, err := readMsg(br)
	if err != nil {
		return nil, fmt.Errorf("openflow: waiting for HELLO: %w", err)
	}
	if m.typ != typeHello {
		return nil, fmt.Errorf("openflow: first message is type %d, not HELLO", m.typ)
	}
	v, err := negotiate(ours, m.version, helloBitmap(m.body))
	if err != nil {
		// Tell the switch why, as the spec asks; OVS logs it.
		b := appendHeader(nil, Version(m.version), typeError, m.xid)
		b = append(b, 0, 0, 0, 0) // OFPET_HELLO_FAILED, OFPHFC_INCOMPATIBLE
		b = append(b, err.Error()...)
		if b, ferr := finishMsg(b, 0); ferr == nil {
			nc.Write(b)
		}
		return nil, err
	}
	if !stop() && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	c := &conn{nc: nc, version: v, calls: map[uint32]*call{}, done: make(chan struct{})}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop(br)
	if probe > 0 {
		go c.keepalive(probe)
	}
	return c, nil
}

// helloMsg is an OFPT_HELLO carrying a version bitmap element (OpenFlow 1.3.1+), so a peer
// that allows a non-contiguous set of versions can still pick a common one.
func helloMsg(v Version, bitmap uint32) []byte {
	b := appendHeader(nil, v, typeHello, 1)
	b = binary.BigEndian.AppendUint16(b, 1) // OFPHET_VERSIONBITMAP
	b = binary.BigEndian.AppendUint16(b, 8)
	b = binary.BigEndian.AppendUint32(b, bitmap)
	b, _ = finishMsg(b, 0)
	return b
}

// helloBitmap returns the first word of the HELLO's version bitmap, 0 if it has none (OVS
// sends none when it allows every version up to the one in its header).
func helloBitmap(body []byte) uint32 {
	for len(body) >= 4 {
		typ, n := binary.BigEndian.Uint16(body), int(binary.BigEndian.Uint16(body[2:]))
		if n < 4 || n > len(body) {
			return 0
		}
		if typ == 1 && n >= 8 {
			return binary.BigEndian.Uint32(body[4:])
		}
		body = body[min((n+7)/8*8, len(body)):]
	}
	return 0
}

// negotiate picks the version (OpenFlow 1.3.1 section 6.3.1): the highest in both bitmaps,
// or without a peer bitmap the lower of the two header versions, if we support it.
func negotiate(ours uint32, peerVersion uint8, peerBitmap uint32) (Version, error) {
	if peerBitmap != 0 {
		if common := ours & peerBitmap; common != 0 {
			return Version(31 - bits.LeadingZeros32(common)), nil
		}
		return 0, fmt.Errorf("openflow: no common version (ours 0x%x, switch's 0x%x): set the bridge's protocols to include OpenFlow13 or OpenFlow14", ours, peerBitmap)
	}
	v := min(Version(31-bits.LeadingZeros32(ours)), Version(peerVersion))
	if ours&(1<<v) == 0 {
		return 0, fmt.Errorf("openflow: no common version (ours 0x%x, switch's up to 0x%02x): set the bridge's protocols to include OpenFlow13 or OpenFlow14", ours, peerVersion)
	}
	return v, nil
}

func (c *conn) readLoop(br *bufio.Reader) {
	for {
		m, err := readMsg(br)
		if err != nil {
			c.fail(err)
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		if m.typ == typeEchoRequest {
			// Not from this goroutine: a write can block while a large Sync is being sent,
			// and the switch stops reading until we read its replies.
			b := appendHeader(nil, c.version, typeEchoReply, m.xid)
			b = append(b, m.body...)
			if b, err := finishMsg(b, 0); err == nil {
				go c.send(context.Background(), b)
			}
			continue
		}
		c.mu.Lock()
		cl := c.calls[m.xid]
		c.mu.Unlock()
		if cl != nil {
			cl.deliver(m)
		}
	}
}

// keepalive sends an echo request after interval without a message and drops the
// connection after two: a unix socket reports a dead ovs-vswitchd at once, but a stopped
// one or a TCP peer that vanished does not.
func (c *conn) keepalive(interval time.Duration) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, c.lastRecv.Load()))
		switch {
		case idle > 2*interval:
			c.fail(fmt.Errorf("no message for %v (echo unanswered)", idle.Round(time.Millisecond)))
			return
		case idle > interval:
			b := appendHeader(nil, c.version, typeEchoRequest, c.nextXID())
			if b, err := finishMsg(b, 0); err == nil {
				go c.send(context.Background(), b)
			}
		}
	}
}

// fail ends the connection once, recording why.
func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	c.nc.Close()
}

func (c *conn) close() { c.fail(errors.New("closed")) }

// lost is the error for an operation cut short by the end of the connection.
func (c *conn) lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%w: %v", errConnLost, c.err)
}

func (c *conn) nextXID() uint32 {
	for {
		if x := c.xid.Add(1); x != 0 && x != 1 { // 1 is the HELLO's
			return x
		}
	}
}

// send writes b, which holds whole messages. Cancelling ctx interrupts the write; a partial
// write leaves the stream unusable, so any write error ends the connection.
func (c *conn) send(ctx context.Context, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.lost()
	default:
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Now()) })
	defer stop()
	if _, err := c.nc.Write(b); err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.lost()
	}
	return nil
}

// register routes the messages with these xids to a new call until unregister.
func (c *conn) register(xids ...uint32) *call {
	cl := &call{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	for _, x := range xids {
		c.calls[x] = cl
	}
	c.mu.Unlock()
	return cl
}

func (c *conn) unregister(xids ...uint32) {
	c.mu.Lock()
	for _, x := range xids {
		delete(c.calls, x)
	}
	c.mu.Unlock()
}

// next returns the call's next message, waiting for it.
func (c *conn) next(ctx context.Context, cl *call) (msg, error) {
	for {
		cl.mu.Lock()
		if len(cl.msgs) > 0 {
			m := cl.msgs[0]
			cl.msgs = cl.msgs[1:]
			cl.mu.Unlock()
			return m, nil
		}
		cl.mu.Unlock()
		select {
		case <-cl.wake:
		case <-c.done:
			// The reader may have delivered the last messages just before the end.
			cl.mu.Lock()
			n := len(cl.msgs)
			cl.mu.Unlock()
			if n == 0 {
				return msg{}, c.lost()
			}
		case <-ctx.Done():
			return msg{}, ctx.Err()
		}
	}
}

// dump returns the switch's flows that carry cookie, from all tables.
func (c *conn) dump(ctx context.Context, cookie uint64) ([]Flow, error) {
	xid := c.nextXID()
	req, err := appendFlowStatsRequest(nil, c.version, xid, cookie)
	if err != nil {
		return nil, err
	}
	cl := c.register(xid)
	defer c.unregister(xid)
	if err := c.send(ctx, req); err != nil {
		return nil, err
	}
	var flows []Flow
	for {
		m, err := c.next(ctx, cl)
		if err != nil {
			return nil, err
		}
		switch m.typ {
		case typeError:
			e, err := parseError(m.body)
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("openflow: flow dump: %w", e)
		case typeMultipartReply:
			fs, more, err := parseFlowStats(m.body)
			if err != nil {
				return nil, err
			}
			flows = append(flows, fs...)
			if !more {
				return flows, nil
			}
		}
	}
}
