package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// Server answers probes, as the pod workload: Line(Name, client) on every TCP connection and
// every UDP datagram to one of its ports, and an INIT-ACK carrying that line in its state
// cookie on every SCTP INIT to one of its SCTP ports. Its Echo ports (TCP) send back whatever
// they receive (see Exchange).
type Server struct {
	Name           string
	TCP, UDP, SCTP []uint16
	Echo           []uint16
	// Logf, if set, gets one line per answer.
	Logf func(format string, args ...any)

	mu      sync.Mutex
	servers []server
	wg      sync.WaitGroup
}

// server is one bound socket; serve answers on it until Close.
type server interface {
	serve()
	Close() error
}

// Start binds every port in the calling goroutine's network namespace (call it inside
// harness.InNetns to serve in another one) and serves in the background. It binds all the
// ports or none: on error, whatever it bound is closed again.
func (s *Server) Start() error {
	var servers []server
	fail := func(err error) error {
		for _, srv := range servers {
			srv.Close()
		}
		return err
	}
	for _, p := range s.TCP {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(p)))
		if err != nil {
			return fail(fmt.Errorf("probe: %w", err))
		}
		servers = append(servers, &tcpServer{ln: ln, s: s})
	}
	for _, p := range s.Echo {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(p)))
		if err != nil {
			return fail(fmt.Errorf("probe: echo: %w", err))
		}
		servers = append(servers, &echoServer{ln: ln, conns: map[net.Conn]struct{}{}})
	}
	for _, p := range s.UDP {
		srv, err := listenUDP(p, s)
		if err != nil {
			return fail(fmt.Errorf("probe: UDP port %d: %w", p, err))
		}
		servers = append(servers, srv)
	}
	if len(s.SCTP) > 0 {
		// One raw socket sees every SCTP packet to the namespace; it answers for all ports.
		srv, err := listenSCTP(s.SCTP, s)
		if err != nil {
			return fail(fmt.Errorf("probe: SCTP ports %v: %w", s.SCTP, err))
		}
		servers = append(servers, srv)
	}
	s.mu.Lock()
	s.servers = append(s.servers, servers...)
	s.mu.Unlock()
	for _, srv := range servers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			srv.serve()
		}()
	}
	return nil
}

// Close stops serving and returns once every serving goroutine has ended. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) answer(proto string, port uint16, client netip.Addr) string {
	line := Line(s.Name, client)
	if s.Logf != nil {
		s.Logf("%s %d: %s", proto, port, line)
	}
	return line
}

type tcpServer struct {
	ln net.Listener
	s  *Server
	wg sync.WaitGroup
}

func (t *tcpServer) serve() {
	port := uint16(t.ln.Addr().(*net.TCPAddr).Port)
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				t.wg.Wait()
				return
			}
			continue // EMFILE and the like: the next Accept may work
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer c.Close()
			client := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
			c.Write([]byte(t.s.answer("tcp", port, client) + "\n"))
		}()
	}
}

func (t *tcpServer) Close() error { return t.ln.Close() }
