package openflow

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeSwitch accepts client connections on loopback TCP and hands each to the test.
type fakeSwitch struct {
	ln    net.Listener
	conns chan net.Conn
}

func newFakeSwitch(t *testing.T) *fakeSwitch {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSwitch{ln: ln, conns: make(chan net.Conn, 4)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns <- c
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *fakeSwitch) target() string { return "tcp:" + s.ln.Addr().String() }

// accept returns the next connection after the HELLO exchange; the switch speaks OpenFlow
// 1.4 like OVS 3.1 (HELLO version 1.5, no bitmap) and checks the client's HELLO.
func (s *fakeSwitch) accept(t *testing.T) net.Conn {
	t.Helper()
	var c net.Conn
	select {
	case c = <-s.conns:
	case <-time.After(5 * time.Second):
		t.Fatal("client did not connect")
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{0x06, typeHello, 0, 8, 0, 0, 0, 1})
	m, err := readMsg(c)
	if err != nil || m.typ != typeHello || m.version != 0x05 || helloBitmap(m.body) != 0x30 {
		t.Fatalf("client HELLO: %+v, %v", m, err)
	}
	return c
}

func TestEchoAndKeepalive(t *testing.T) {
	sw := newFakeSwitch(t)
	c, err := New(sw.target(), Options{ProbeInterval: 200 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := sw.accept(t)

	// The switch's echo request is answered with the same xid and payload.
	req := appendHeader(nil, OpenFlow14, typeEchoRequest, 77)
	req = append(req, "ping"...)
	req, _ = finishMsg(req, 0)
	conn.Write(req)
	m, err := readMsg(conn)
	if err != nil || m.typ != typeEchoReply || m.xid != 77 || string(m.body) != "ping" {
		t.Fatalf("echo reply: %+v, %v", m, err)
	}
	// The reader answers as soon as the handshake is done, a moment before the client
	// publishes the connection.
	for deadline := time.Now().Add(2 * time.Second); c.Version() != OpenFlow14; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Version() = %v", c.Version())
		}
	}

	// A silent switch gets an echo request after the probe interval and is dropped after
	// two; the client then connects again.
	start := time.Now()
	m, err = readMsg(conn)
	if err != nil || m.typ != typeEchoRequest {
		t.Fatalf("want the client's echo request, got %+v, %v", m, err)
	}
	for {
		m, err := readMsg(conn) // more echo requests until the client gives up
		if err != nil {
			break
		}
		if m.typ != typeEchoRequest || time.Since(start) > 2*time.Second {
			t.Fatalf("client kept the connection to a silent switch (got type %d)", m.typ)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("dropping a silent switch took %v", d)
	}
	sw.accept(t)
}

func TestSyncWaitsForConnection(t *testing.T) {
	sw := newFakeSwitch(t)
	sw.ln.Close() // nobody listens: the client keeps retrying
	c, err := New(sw.target(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = c.Sync(ctx, 1, []Flow{{Actions: []Action{Output{PortNormal}}}})
	if err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("Sync without a switch: %v", err)
	}
	c.Close()
	if err := c.Sync(context.Background(), 1, nil); err != ErrClosed {
		t.Errorf("Sync after Close: %v", err)
	}
}

func TestSyncRejectsInvalid(t *testing.T) {
	c, err := New("unix:/nonexistent/br.mgmt", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		cookie uint64
		flows  []Flow
		want   string
	}{
		{0, nil, "cannot own flows"},
		{1, []Flow{{Match: Match{IPProto: IPProtoTCP}}}, "needs eth_type"},
		{1, []Flow{{Match: Match{EthType: EthTypeIPv4, TPDst: 80}}}, "tp_src/tp_dst need ip_proto"},
		{1, []Flow{{Match: Match{CTMark: 1}}}, "outside its mask"},
		{1, []Flow{{Actions: []Action{SetCTMark{1}}}}, "outside ct(exec"},
		{1, []Flow{{Actions: []Action{CT{Exec: []Action{SetCTMark{1}}}}}}, "needs commit"},
		{1, []Flow{{Actions: []Action{CT{Commit: true, Exec: []Action{Output{1}}}}}}, "only set_field ct_mark"},
		{1, []Flow{{Actions: []Action{Output{0}}}}, "output to port 0"},
		{1, []Flow{{Cookie: 2}}, "has cookie 0x2"},
		{1, []Flow{{Actions: []Action{nil}}}, "nil action"},
		{1, []Flow{{Priority: 3}, {Priority: 3}}, "same table, priority and match"},
	} {
		err := c.Sync(ctx, tc.cookie, tc.flows)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Sync(%#x, %v): %v, want %q", tc.cookie, tc.flows, err, tc.want)
		}
	}
	c.mu.Lock()
	n := len(c.desired)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("invalid flow sets were remembered: %d", n)
	}
}

func TestDiff(t *testing.T) {
	a := Flow{Priority: 1, Match: Match{InPort: 1}, Actions: []Action{Output{2}}}
	b := Flow{Priority: 2, Match: Match{InPort: 1}, Actions: []Action{Output{3}}}
	bNew := b
	bNew.Actions = []Action{Output{4}}
	c := Flow{Table: 1, Priority: 1}
	ops := func(mods []flowMod) string {
		var s []string
		for _, m := range mods {
			s = append(s, m.op()+" "+m.flow.String())
		}
		return strings.Join(s, "; ")
	}
	for _, tc := range []struct {
		want, have []Flow
		ops        string
	}{
		{[]Flow{a, b}, []Flow{b, a}, ""},
		{[]Flow{a, bNew}, []Flow{a, b}, "add table=0,priority=2,in_port=1 actions=output:4"},
		{[]Flow{a}, []Flow{a, b, c}, "delete table=0,priority=2,in_port=1 actions=output:3; delete table=1,priority=1 actions=drop"},
		{[]Flow{c, a}, nil, "add table=0,priority=1,in_port=1 actions=output:2; add table=1,priority=1 actions=drop"},
	} {
		if got := ops(diff(tc.want, tc.have)); got != tc.ops {
			t.Errorf("diff:\n got %s\nwant %s", got, tc.ops)
		}
	}
}

// TestReadMsgFraming checks that a length below the header size is an error, not a hang.
func TestReadMsgFraming(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go b.Write(binary.BigEndian.AppendUint64(nil, 0x0400000400000001))
	if _, err := readMsg(a); err == nil {
		t.Error("length 4 accepted")
	}
}
