package localnat

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestRedirect: on a test node (testNode), the host has a TCP and a UDP server listening on
// the node IP only (as upstream e2e's
// host-network UDP servers do). A connection from "ovn" to the management address reaches
// them only while the redirect is there, and the UDP answer comes from the management
// address, the one the client sent to. The host's own connection through the port, whose
// answers come to the management address, is left alone.
func TestRedirect(t *testing.T) {
	harness.Require(t, "ip")
	r := harness.NewTestRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const mgmt = "k8s-redir"
	host, ovn := testNode(ctx, t, r, mgmt)
	serveEcho(t, host, "172.31.0.1:8081", "hello")
	serveEcho(t, ovn, "10.9.0.1:9000", "hello")
	dial := func(netns, proto, addr string) (string, error) { return dialLine(netns, proto, addr, time.Second) }
	expect := func(what string, ok bool) {
		t.Helper()
		for _, proto := range []string{"tcp", "udp"} {
			got, err := dial(ovn, proto, "10.9.0.2:8081")
			if ok && (err != nil || got != "hello 10.9.0.1") {
				t.Errorf("%s: %s to the management address: %q, %v; want the node IP's server to answer", what, proto, got, err)
			}
			if !ok && err == nil {
				t.Errorf("%s: %s to the management address answered %q; want no answer", what, proto, got)
			}
		}
		if got, err := dial(host, "tcp", "10.9.0.1:9000"); err != nil || got != "hello 10.9.0.2" {
			t.Errorf("%s: the host's own connection through the port: %q, %v", what, got, err)
		}
	}
	expect("before", false)
	rd, err := NewRedirect("ovnt-test-redirect")
	if err != nil {
		t.Fatal(err)
	}
	mgmtIP, nodeIP := netip.MustParseAddr("10.9.0.2"), netip.MustParseAddr("172.31.0.1")
	inHost := func(f func() error) {
		t.Helper()
		if err := harness.InNetns(host, f); err != nil {
			t.Fatal(err)
		}
	}
	inHost(func() error { return rd.Sync(ctx, mgmt, mgmtIP, nodeIP) })
	inHost(func() error { return rd.Sync(ctx, mgmt, mgmtIP, nodeIP) }) // idempotent
	expect("redirected", true)
	if err := rd.Sync(ctx, mgmt, nodeIP, nodeIP); err == nil {
		t.Error("Sync accepted the node IP as the management address")
	}
	inHost(func() error { return rd.Delete(ctx) })
	inHost(func() error { return rd.Delete(ctx) })
	expect("deleted", false)
}
