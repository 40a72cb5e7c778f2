//go:build linux

package harness

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// tcpForwarder copies every connection accepted on ln to a new connection to target.
type tcpForwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (f *tcpForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed {
				return
			}
			// EMFILE and the like pass; do not spin on them.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		f.wg.Add(1)
		go f.handle(c)
	}
}

// handle runs on an ordinary goroutine, hence on a thread in the root namespace, so the dial
// reaches the API server's loopback even though the accepted connection lives in netns.
func (f *tcpForwarder) handle(in net.Conn) {
	defer f.wg.Done()
	out, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{}, 2)
	go copyHalf(out, in, done)
	go copyHalf(in, out, done)
	<-done
	<-done
	in.Close()
	out.Close()
}

// copyHalf copies src to dst. On EOF it half-closes dst so the peer sees the end of the
// stream while the other direction drains; on an error it closes both so the other
// direction ends too.
func copyHalf(dst, src net.Conn, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

func (f *tcpForwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *tcpForwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		delete(f.conns, c)
	}
}

// Close stops accepting, cuts every open connection and waits for the goroutines.
// Idempotent.
func (f *tcpForwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	err := f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EBADF) {
		err = nil
	}
	return err
}
