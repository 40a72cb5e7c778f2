package integration

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// ping pings dst from netns and fails the test if no answer comes.
func ping(ctx context.Context, t *testing.T, what, netns, dst string) {
	t.Helper()
	if out, err := harness.Exec(ctx, netns, "ping", "-c2", "-i0.2", "-w10", dst); err != nil {
		t.Errorf("%s: ping %s: %v\n%s", what, dst, err, out)
	}
}

// dial opens a TCP connection from netns.
func dial(ctx context.Context, netns, addr string) (net.Conn, error) {
	var conn net.Conn
	err := harness.InNetns(netns, func() (err error) {
		conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// tcpEcho checks a fresh TCP connection from netns to an echo port (probe.Server.Echo) at
// addr with size bytes.
func tcpEcho(ctx context.Context, t *testing.T, what, netns, addr string, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := harness.InNetns(netns, func() error { return probe.Echo(ctx, addr, size) }); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}
