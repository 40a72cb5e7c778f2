package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// echoServer is one of a Server's Echo ports: it sends back every byte it receives, for the
// checks that a bulk transfer crosses a path intact (MTU, GENEVE, TCP segmentation), which
// the one-line answer of a TCP port cannot show.
type echoServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func (e *echoServer) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				e.wg.Wait()
				return
			}
			continue // EMFILE and the like: the next Accept may work
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			io.Copy(c, c)
			c.Close()
			e.mu.Lock()
			delete(e.conns, c)
			e.mu.Unlock()
		}()
	}
}

// Close stops accepting and ends the open connections: an echo lasts as long as its client
// keeps the connection, and Server.Close must not wait for clients.
func (e *echoServer) Close() error {
	err := e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	return err
}

// Exchange sends size random bytes on conn, connected to an Echo port, and checks that the
// same bytes come back. It can be called again on the same connection, to check that a
// connection survives something.
func Exchange(conn net.Conn, size int) error {
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	defer conn.SetDeadline(time.Time{})
	want := make([]byte, size)
	rand.Read(want)
	werr := make(chan error, 1)
	// Written concurrently: the echo comes back while we write, and a large write would
	// otherwise fill both sockets' buffers and stall.
	go func() {
		_, err := conn.Write(want)
		werr <- err
	}()
	got := make([]byte, size)
	if n, err := io.ReadFull(conn, got); err != nil {
		return fmt.Errorf("probe: reading the echo after %d of %d bytes: %w", n, size, err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("probe: writing %d bytes: %w", size, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("probe: the echo differs from the %d bytes sent", size)
	}
	return nil
}

// Echo connects to the Echo port at addr ("host:port") and Exchanges size bytes once.
func Echo(ctx context.Context, addr string, size int) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("probe: TCP %s: %w", addr, err)
	}
	defer c.Close()
	if err := Exchange(c, size); err != nil {
		return fmt.Errorf("%w (to %s)", err, addr)
	}
	return nil
}
