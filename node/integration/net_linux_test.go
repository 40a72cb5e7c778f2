package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// ping pings dst from netns and fails the test if no answer comes.
func ping(ctx context.Context, t *testing.T, what, netns, dst string) {
	t.Helper()
	if out, err := harness.Exec(ctx, netns, "ping", "-c2", "-i0.2", "-w10", dst); err != nil {
		t.Errorf("%s: ping %s: %v\n%s", what, dst, err, out)
	}
}

// echoServer serves TCP echo on addr inside netns until the test ends.
func echoServer(t *testing.T, netns, addr string) {
	t.Helper()
	var ln net.Listener
	if err := harness.InNetns(netns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
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

// exchange sends size random bytes on conn to an echo server and checks they come back.
func exchange(conn net.Conn, size int) error {
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	want := make([]byte, size)
	rand.Read(want)
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(want)
		werr <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(conn, got); err != nil {
		return fmt.Errorf("reading the echo: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("the echo differs from the %d bytes sent", size)
	}
	return nil
}

// tcpEcho checks a fresh TCP connection from netns to an echo server at addr.
func tcpEcho(ctx context.Context, t *testing.T, what, netns, addr string, size int) {
	t.Helper()
	conn, err := dial(ctx, netns, addr)
	if err != nil {
		t.Errorf("%s: TCP to %s: %v", what, addr, err)
		return
	}
	defer conn.Close()
	if err := exchange(conn, size); err != nil {
		t.Errorf("%s: TCP to %s: %v", what, addr, err)
	}
}
