//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// The invalid conntrack state bug (Kubernetes issue 74839): a backend's segment that
// conntrack marks invalid (out of the TCP window) does not get the load balancer's DNAT
// reversed by Linux's conntrack. Delivered, it reaches the client with the backend's own
// address as its source; the client knows no such connection, answers with a RST, and the
// RST tears down the real connection. OVN drops packets conntrack marks invalid on every
// switch with a load balancer (docs/security.md, "Packets conntrack marks invalid"); this
// test checks it with real packets.
//
// The upstream test (its server is the image regression-issue-74839) watches for the
// client's RST. Under the test cluster's userspace datapath it passes whatever OVN does with
// invalid packets: Open vSwitch's userspace conntrack reverses the DNAT even of a packet it
// marks invalid (this test's last check, with OVN's drop off, shows the segment arriving from
// the ClusterIP), so the client never sees the backend's address. This test therefore looks
// at whether the invalid segment reaches the client's namespace at all, and sends one a
// gigabyte beyond the window, which every conntrack's window check rejects.

const (
	invalidCTPort = 9000
	// invalidCTMark is the payload of the injected segment, so the client side knows it.
	invalidCTMark = "ovnt-invalid-conntrack-probe"
)

// tcpSegment is the part of a TCP header the test reads and writes.
type tcpSegment struct {
	srcPort, dstPort uint16
	seq, ack         uint32
	flags            uint8
	payload          []byte
}

const (
	tcpPSH = 0x08
	tcpACK = 0x10
)

// parseTCP reads a TCP segment (without its IP header, as an ip4:tcp socket returns it).
func parseTCP(b []byte) (tcpSegment, bool) {
	if len(b) < 20 {
		return tcpSegment{}, false
	}
	off := int(b[12]>>4) * 4
	if off < 20 || off > len(b) {
		return tcpSegment{}, false
	}
	return tcpSegment{
		srcPort: binary.BigEndian.Uint16(b[0:]), dstPort: binary.BigEndian.Uint16(b[2:]),
		seq: binary.BigEndian.Uint32(b[4:]), ack: binary.BigEndian.Uint32(b[8:]),
		flags: b[13], payload: b[off:],
	}, true
}

// encode writes the segment with a 20-byte header and its checksum over the IPv4
// pseudo-header of src and dst.
func (s tcpSegment) encode(src, dst netip.Addr) []byte {
	b := make([]byte, 20+len(s.payload))
	binary.BigEndian.PutUint16(b[0:], s.srcPort)
	binary.BigEndian.PutUint16(b[2:], s.dstPort)
	binary.BigEndian.PutUint32(b[4:], s.seq)
	binary.BigEndian.PutUint32(b[8:], s.ack)
	b[12] = 5 << 4
	b[13] = s.flags
	binary.BigEndian.PutUint16(b[14:], 65535)
	copy(b[20:], s.payload)
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 6, byte(len(b)>>8), byte(len(b)))
	binary.BigEndian.PutUint16(b[16:], checksum(append(pseudo, b...)))
	return b
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// rawTCP is an ip4:tcp socket in a network namespace: it sees every TCP segment the
// namespace receives (before TCP looks at it) and sends segments as they are given.
type rawTCP struct {
	conn *net.IPConn
	segs chan rawSeg
}

type rawSeg struct {
	from netip.Addr
	tcpSegment
}

func openRawTCP(t *testing.T, netns string) *rawTCP {
	t.Helper()
	r := &rawTCP{segs: make(chan rawSeg, 4096)}
	if err := harness.InNetns(netns, func() error {
		var err error
		r.conn, err = net.ListenIP("ip4:tcp", nil)
		return err
	}); err != nil {
		t.Fatalf("raw TCP socket in %s: %v", netns, err)
	}
	t.Cleanup(func() { r.conn.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, addr, err := r.conn.ReadFromIP(buf)
			if err != nil {
				close(r.segs)
				return
			}
			from, _ := netip.AddrFromSlice(addr.IP.To4())
			if s, ok := parseTCP(buf[:n]); ok {
				s.payload = bytes.Clone(s.payload)
				select {
				case r.segs <- rawSeg{from, s}:
				default: // a busy namespace: the test looks for a few segments only
				}
			}
		}
	}()
	return r
}

// drain forgets what the socket has seen so far.
func (r *rawTCP) drain() {
	for {
		select {
		case <-r.segs:
		default:
			return
		}
	}
}

// invalidCTServer is a TCP listener on invalidCTPort in a backend pod's namespace (the
// test's own, on the pod's address), with a raw socket there to read the connections'
// sequence numbers and to inject segments.
type invalidCTServer struct {
	ip  netip.Addr
	ln  net.Listener
	raw *rawTCP
}

func startInvalidCTServer(t *testing.T, pod *corev1.Pod) *invalidCTServer {
	t.Helper()
	netns := podNetns(t, pod)
	s := &invalidCTServer{ip: netip.MustParseAddr(pod.Status.PodIP)}
	if err := harness.InNetns(netns, func() error {
		var err error
		s.ln, err = net.Listen("tcp4", netip.AddrPortFrom(s.ip, invalidCTPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ln.Close() })
	s.raw = openRawTCP(t, netns)
	return s
}

// injected is what one connection saw of the backend's two injected segments.
type injected struct {
	// inWindow is what the client read from its socket after the in-window segment.
	inWindow string
	// outOfWindow is the out-of-window segment as it reached the client's namespace; nil
	// if it did not within two seconds.
	outOfWindow *rawSeg
}

// inject opens a connection from netns to addr (a Service frontend that leads to s) and has
// the client send a line. The backend then sends, from its raw socket, a segment that
// carries on the stream where it should (the control: the client must read it, which proves
// the injected segments are well formed and find their way), and then one a gigabyte beyond
// the window, and reports whether that reached the client's namespace within two seconds.
func (s *invalidCTServer) inject(t *testing.T, netns string, addr netip.AddrPort) injected {
	t.Helper()
	client := openRawTCP(t, netns)
	defer client.conn.Close()
	s.raw.drain()
	var conn net.Conn
	if err := harness.InNetns(netns, func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(t.Context(), "tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatalf("connecting to %s: %v", addr, err)
	}
	defer conn.Close()
	s.ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	peer, err := s.ln.Accept()
	if err != nil {
		t.Fatalf("the backend accepting the connection to %s: %v", addr, err)
	}
	defer peer.Close()
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	// The client's data segment, as the backend received it, gives both sequence numbers.
	remote := netip.MustParseAddrPort(peer.RemoteAddr().String())
	var last tcpSegment
	timeout := time.After(5 * time.Second)
	for len(last.payload) == 0 {
		select {
		case seg := <-s.raw.segs:
			if seg.from == remote.Addr() && seg.srcPort == remote.Port() && seg.dstPort == invalidCTPort {
				last = seg.tcpSegment
			}
		case <-timeout:
			t.Fatalf("the backend saw no data segment from %s", remote)
		}
	}
	send := func(seg tcpSegment) {
		t.Helper()
		if _, err := s.raw.conn.WriteToIP(seg.encode(s.ip, remote.Addr()), &net.IPAddr{IP: remote.Addr().AsSlice()}); err != nil {
			t.Fatalf("injecting a segment: %v", err)
		}
	}
	var got injected
	good := []byte("in-window\n")
	ack := last.seq + uint32(len(last.payload))
	send(tcpSegment{srcPort: invalidCTPort, dstPort: remote.Port(), seq: last.ack, ack: ack, flags: tcpPSH | tcpACK, payload: good})
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	got.inWindow = string(buf[:n])
	client.drain()
	send(tcpSegment{srcPort: invalidCTPort, dstPort: remote.Port(), seq: last.ack + uint32(len(good)) + 1<<30, ack: ack,
		flags: tcpPSH | tcpACK, payload: []byte(invalidCTMark)})
	deadline := time.After(2 * time.Second)
	for {
		select {
		case seg, ok := <-client.segs:
			if !ok {
				t.Fatal("the client's raw socket closed")
			}
			if bytes.Equal(seg.payload, []byte(invalidCTMark)) {
				got.outOfWindow = &seg
				return got
			}
		case <-deadline:
			return got
		}
	}
}

// TestInvalidConntrackDropped: a backend's segment that conntrack marks invalid never
// reaches the client, whichever way the client came through a load balancer: from a pod of
// another node and of the backend's node to the ClusterIP, from a node's host network to
// the ClusterIP, from the external host to a NodePort, and to a backend on the remote
// chassis; the in-window segment sent the same way just before it does reach the client.
// Last, the check is shown to see the difference: with OVN's invalid-packet match turned
// off (NB_Global options:use_ct_inv_match=false), the same segment reaches the client. (The
// userspace datapath then reverses the DNAT of the invalid packet, so the client here gets
// it from the ClusterIP; Linux's conntrack, under the kernel datapath, does not, and the
// client gets it from the backend's own address: the bug.)
func TestInvalidConntrackDropped(t *testing.T) {
	ns := testNamespace(t)
	srv := map[string]*invalidCTServer{
		"node2":    startInvalidCTServer(t, startPod(t, workloadPod(ns, "backend", "node2", "backend"))),
		remoteNode: startInvalidCTServer(t, startPod(t, workloadPod(ns, "backend-remote", remoteNode, "backend-remote"))),
	}
	vip := map[string]netip.Addr{}
	var np int32
	for node, app := range map[string]string{"node2": "backend", remoteNode: "backend-remote"} {
		svc := newService(ns, app, app, svcPort("tcp", corev1.ProtocolTCP, invalidCTPort, 0))
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc = createService(t, svc)
		vip[node] = netip.MustParseAddr(svc.Spec.ClusterIP)
		if node == "node2" {
			np = nodePort(t, svc, "tcp")
		}
	}
	pod1 := startPod(t, podSpec(ns, "client1", "node1"))
	pod2 := startPod(t, podSpec(ns, "client2", "node2"))
	cases := []struct {
		name, server, netns string
		addr                netip.AddrPort
	}{
		{"pod of another node to ClusterIP", "node2", podNetns(t, pod1), netip.AddrPortFrom(vip["node2"], invalidCTPort)},
		{"pod of the backend's node to ClusterIP", "node2", podNetns(t, pod2), netip.AddrPortFrom(vip["node2"], invalidCTPort)},
		{"host network to ClusterIP", "node2", cl.Node("node1").Netns, netip.AddrPortFrom(vip["node2"], invalidCTPort)},
		{"external host to NodePort", "node2", cl.External.Netns, addrPort(cl.Node("node1").IP, np)},
		{"pod to ClusterIP of a backend on the remote chassis", remoteNode, podNetns(t, pod1), netip.AddrPortFrom(vip[remoteNode], invalidCTPort)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			waitConnects(t, c.netns, c.addr, srv[c.server])
			for i := 0; i < 2; i++ {
				got := srv[c.server].inject(t, c.netns, c.addr)
				if got.inWindow != "in-window\n" {
					t.Errorf("connection %d to %s: the client read %q after the backend's in-window segment, want %q", i, c.addr, got.inWindow, "in-window\n")
				}
				if seg := got.outOfWindow; seg != nil {
					t.Errorf("connection %d to %s: the backend's out-of-window segment reached the client, from %s:%d", i, c.addr, seg.from, seg.srcPort)
				}
			}
		})
	}
	t.Run("the check sees the difference with the invalid-packet drop off", func(t *testing.T) {
		if _, err := cl.Central.NBCtl(t.Context(), "set", "NB_Global", ".", "options:use_ct_inv_match=false"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := cl.Central.NBCtl(context.Background(), "remove", "NB_Global", ".", "options", "use_ct_inv_match"); err != nil {
				t.Errorf("restoring use_ct_inv_match: %v", err)
			}
		})
		c := cases[0]
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		// ovn-northd and every ovn-controller need a moment to take the drop out.
		if err := poll.Until(ctx, "the out-of-window segment reaching the client", 200*time.Millisecond, func() (bool, error) {
			seg := srv[c.server].inject(t, c.netns, c.addr).outOfWindow
			if seg != nil {
				t.Logf("with use_ct_inv_match=false the out-of-window segment reached the client from %s:%d", seg.from, seg.srcPort)
			}
			return seg != nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// waitConnects waits until a connection from netns to addr reaches s: the load balancer
// may not be in place everywhere yet.
func waitConnects(t *testing.T, netns string, addr netip.AddrPort, s *invalidCTServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := poll.Until(ctx, fmt.Sprintf("a connection from %s to %s", netns, addr), 200*time.Millisecond, func() (bool, error) {
		err := harness.InNetns(netns, func() error {
			conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp4", addr.String())
			if err == nil {
				conn.Close()
			}
			return err
		})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	s.ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	if peer, err := s.ln.Accept(); err == nil {
		peer.Close()
	}
}
