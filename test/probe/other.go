//go:build !linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// SCTPInit needs raw sockets as Linux has them; elsewhere it reports errors.ErrUnsupported.
func SCTPInit(ctx context.Context, dst netip.Addr, port uint16) (string, error) {
	return "", fmt.Errorf("probe: SCTP INIT to %s:%d: %w", dst, port, errors.ErrUnsupported)
}

func listenSCTP(ports []uint16, s *Server) (server, error) { return nil, errors.ErrUnsupported }

// udpServer answers from whatever address the system picks: without IP_PKTINFO, a namespace
// with several addresses may answer from another one than the client asked.
type udpServer struct {
	c    *net.UDPConn
	port uint16
	s    *Server
}

func listenUDP(port uint16, s *Server) (server, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
	if err != nil {
		return nil, err
	}
	return &udpServer{c: c, port: port, s: s}, nil
}

func (u *udpServer) serve() {
	buf := make([]byte, 65536)
	for {
		_, from, err := u.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		u.c.WriteToUDPAddrPort([]byte(u.s.answer("udp", u.port, from.Addr())+"\n"), from)
	}
}

func (u *udpServer) Close() error { return u.c.Close() }
