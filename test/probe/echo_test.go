package probe

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// freePort is a TCP port nothing listens on right now.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestEcho: a large exchange comes back intact, twice on one connection, and Close returns
// while a client still holds a connection open.
func TestEcho(t *testing.T) {
	port := freePort(t)
	srv := &Server{Name: "echo", Echo: []uint16{port}}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Echo(ctx, addr, 4<<20); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if err := Exchange(c, 64<<10); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a client's open echo connection")
	}
	if err := Exchange(c, 1); err == nil {
		t.Error("the echo still answers after Close")
	}
}
