//go:build linux

package probe

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// udpServer answers each datagram from the address the datagram was sent to. A socket bound
// to the wildcard address would otherwise answer from whatever source the route back to the
// client prefers: in a namespace with several addresses (a hostNetwork pod on a node that also
// has a management port) the answer would come from another IP than the one the client asked,
// and a connected client, or a conntrack entry, would drop it. IP_PKTINFO gives the
// destination of each datagram and sets the source of the answer.
//
// IPv4 only, like the SCTP responder.
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
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	}); err != nil || serr != nil {
		c.Close()
		return nil, errors.Join(err, serr)
	}
	return &udpServer{c: c, port: port, s: s}, nil
}

func (u *udpServer) serve() {
	buf := make([]byte, 65536)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	for {
		_, oobn, _, from, err := u.c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		answer := []byte(u.s.answer("udp", u.port, from.Addr()) + "\n")
		var reply []byte
		if local, ok := pktinfoDst(oob[:oobn]); ok {
			reply = unix.PktInfo4(&unix.Inet4Pktinfo{Spec_dst: local.As4()})
		}
		u.c.WriteMsgUDPAddrPort(answer, reply, from)
	}
}

// pktinfoDst returns the local address an IP_PKTINFO control message names.
func pktinfoDst(oob []byte) (netip.Addr, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, m := range msgs {
		// struct in_pktinfo { int ipi_ifindex; struct in_addr ipi_spec_dst, ipi_addr; }
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo {
			return netip.AddrFrom4([4]byte(m.Data[4:8])), true
		}
	}
	return netip.Addr{}, false
}

func (u *udpServer) Close() error { return u.c.Close() }
