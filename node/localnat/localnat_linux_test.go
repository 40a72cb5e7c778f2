package localnat

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestLocalNodePort builds, in two network namespaces, what a node has: "host" with the node
// IP and a management port (a veth) routing the service range to "ovn", which answers on a
// ClusterIP with the client address it sees. The host's connection to its own node IP's
// NodePort must reach the ClusterIP, from the management port's address, and only while the
// rule is there.
func TestLocalNodePort(t *testing.T) {
	harness.Require(t, "ip")
	r := harness.NewTestRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const mgmt = "k8s-lnat"
	host, ovn := testNode(ctx, t, r, mgmt)
	// The "service": TCP and UDP on the ClusterIP's port 80, answering with the client
	// address; the host's own listener on the NodePort says "host".
	serveEcho(t, ovn, "10.96.5.5:80", "svc")
	serveAnswer(t, ovn, "10.96.5.5:81", func(from netip.AddrPort) string { return "short " + from.String() })
	var hostLn net.Listener
	if err := harness.InNetns(host, func() (err error) { hostLn, err = net.Listen("tcp", "172.31.0.1:30081"); return err }); err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()

	nat, err := New(Config{MgmtIface: mgmt})
	if err != nil {
		t.Fatal(err)
	}
	inHost := func(f func() error) {
		t.Helper()
		if err := harness.InNetns(host, f); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(proto, addr string) string {
		t.Helper()
		got, err := dialLine(host, proto, addr, 2*time.Second)
		if err != nil {
			return "error: " + err.Error()
		}
		return got
	}
	node, svc := netip.MustParseAddr("172.31.0.1"), netip.MustParseAddr("10.96.5.5")
	rules := []Rule{
		{Protocol: svcmodel.TCP.IPProto(), NodeIP: node, NodePort: 30080, ClusterIP: svc, Port: 80},
		{Protocol: svcmodel.UDP.IPProto(), NodeIP: node, NodePort: 30080, ClusterIP: svc, Port: 80},
		{Protocol: svcmodel.TCP.IPProto(), NodeIP: node, NodePort: 30082, ClusterIP: svc, Port: 81, KeepSource: true},
		{Protocol: svcmodel.UDP.IPProto(), NodeIP: node, NodePort: 30082, ClusterIP: svc, Port: 81, KeepSource: true},
	}
	for i := 0; i < 2; i++ { // the second Sync replaces the table with the same rules
		inHost(func() error { return nat.Sync(ctx, rules) })
	}
	if got := ask("tcp", "172.31.0.1:30080"); got != "svc 10.9.0.2" {
		t.Errorf("TCP to the NodePort: %q, want the service seeing the management port's address", got)
	}
	if got := ask("udp", "172.31.0.1:30080"); got != "svc 10.9.0.2" {
		t.Errorf("UDP to the NodePort: %q", got)
	}
	if got := ask("tcp", "172.31.0.1:30081"); got != "host" {
		t.Errorf("another port of the node IP: %q, want the host's own listener", got)
	}
	if got := ask("tcp", "10.96.5.5:80"); got != "svc 10.9.0.2" {
		t.Errorf("the ClusterIP itself: %q", got)
	}
	// An externalTrafficPolicy=Local NodePort keeps the node IP, from a short-circuit port.
	for _, proto := range []string{"tcp", "udp"} {
		got := ask(proto, "172.31.0.1:30082")
		from, err := netip.ParseAddrPort(strings.TrimPrefix(got, "short "))
		if err != nil || from.Addr() != node || from.Port() < contract.ShortCircuitPortMin {
			t.Errorf("%s to the NodePort that keeps the source: %q, want the node IP and a port from %d", proto, got, contract.ShortCircuitPortMin)
		}
	}
	// Another table's DNAT to the same backend (an operator's, a hostPort's) is not ours to
	// masquerade: it keeps its source, as if our table were not there (security audit L4).
	inHost(func() error { return operatorDNAT(node, 30090, svc, 80) })
	if got := ask("tcp", "172.31.0.1:30090"); got != "svc 172.31.0.1" {
		t.Errorf("another table's DNAT: %q, want the service seeing the node IP, not the management port's address", got)
	}
	// A bad rule changes nothing.
	inHost(func() error {
		if err := nat.Sync(ctx, append(rules, Rule{Protocol: 1, NodeIP: node, NodePort: 1, ClusterIP: svc, Port: 1})); err == nil {
			t.Error("Sync accepted protocol 1")
		}
		return nil
	})
	if got := ask("tcp", "172.31.0.1:30080"); got != "svc 10.9.0.2" {
		t.Errorf("after a refused Sync: %q", got)
	}
	// Only UDP left, then nothing.
	inHost(func() error { return nat.Sync(ctx, rules[1:]) })
	if got := ask("tcp", "172.31.0.1:30080"); !strings.Contains(got, "refused") {
		t.Errorf("TCP after its rule went: %q, want connection refused", got)
	}
	if got := ask("udp", "172.31.0.1:30080"); got != "svc 10.9.0.2" {
		t.Errorf("UDP after the TCP rule went: %q", got)
	}
	inHost(func() error { return nat.Delete(ctx) })
	inHost(func() error { return nat.Delete(ctx) }) // already gone: no error
	if got := ask("udp", "172.31.0.1:30080"); !strings.HasPrefix(got, "error") {
		t.Errorf("UDP after Delete: %q", got)
	}
}

// operatorDNAT adds a table of its own, as an operator (or a hostPort plugin) would, with
// "ip daddr nodeIP tcp dport port dnat to dst:dstPort" in its output hook.
func operatorDNAT(nodeIP netip.Addr, port uint16, dst netip.Addr, dstPort uint16) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: "operator", Family: nftables.TableFamilyIPv4})
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: dnatExprs(Rule{
		Protocol: svcmodel.TCP.IPProto(), NodeIP: nodeIP, NodePort: port, ClusterIP: dst, Port: dstPort})})
	return c.Flush()
}

// testNode builds, in two network namespaces, what a node has: "host" with the node IP
// 172.31.0.1 and a management port mgmt (a veth, 10.9.0.2/24) routing the service range to
// "ovn" (10.9.0.1), which holds the ClusterIP 10.96.5.5 and routes the node IP back.
func testNode(ctx context.Context, t *testing.T, r *harness.Run, mgmt string) (host, ovn string) {
	t.Helper()
	host, err := r.AddNetns("host")
	if err != nil {
		t.Fatal(err)
	}
	ovn, err = r.AddNetns("ovn")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"", "ip", "link", "add", mgmt, "netns", host, "type", "veth", "peer", "name", "ovn0", "netns", ovn},
		{host, "ip", "addr", "add", "10.9.0.2/24", "dev", mgmt},
		{host, "ip", "link", "set", mgmt, "up"},
		{host, "ip", "link", "set", "lo", "up"},
		{host, "ip", "addr", "add", "172.31.0.1/32", "dev", "lo"}, // the node IP
		{host, "ip", "route", "add", "10.96.0.0/16", "via", "10.9.0.1"},
		{ovn, "ip", "addr", "add", "10.9.0.1/24", "dev", "ovn0"},
		{ovn, "ip", "addr", "add", "10.96.5.5/32", "dev", "ovn0"}, // the ClusterIP
		{ovn, "ip", "link", "set", "ovn0", "up"},
		{ovn, "ip", "route", "add", "172.31.0.1/32", "via", "10.9.0.2"},
	} {
		if _, err := harness.Exec(ctx, c[0], c[1], c[2:]...); err != nil {
			t.Fatal(err)
		}
	}
	return host, ovn
}

// serveEcho listens on addr over TCP and UDP in netns until the test ends, and answers each
// connection or datagram with "tag <client address>".
func serveEcho(t *testing.T, netns, addr, tag string) {
	t.Helper()
	serveAnswer(t, netns, addr, func(from netip.AddrPort) string { return tag + " " + from.Addr().String() })
}

// serveAnswer listens on addr over TCP and UDP in netns until the test ends, and answers each
// connection or datagram with answer(its client's address and port).
func serveAnswer(t *testing.T, netns, addr string, answer func(from netip.AddrPort) string) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := harness.InNetns(netns, func() (err error) {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(answer(c.RemoteAddr().(*net.TCPAddr).AddrPort()) + "\n"))
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(answer(from.(*net.UDPAddr).AddrPort())+"\n"), from)
		}
	}()
}

// dialLine connects from netns to addr (for UDP, sends a datagram) and returns the first
// line it gets back.
func dialLine(netns, proto, addr string, timeout time.Duration) (string, error) {
	var line string
	err := harness.InNetns(netns, func() error {
		c, err := net.DialTimeout(proto, addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		if proto == "udp" {
			if _, err := c.Write([]byte("hi")); err != nil {
				return err
			}
		}
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}
