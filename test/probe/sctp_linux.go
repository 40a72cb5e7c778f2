//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sctpRetry is how often SCTPInit sends its INIT again while no INIT-ACK came back, as SCTP's
// own T1-init timer does (RFC 9260 starts it at 1 s).
const sctpRetry = time.Second

// SCTPInit sends an SCTP INIT from the calling goroutine's network namespace to dst:port,
// again every second until the matching INIT-ACK comes back or ctx ends, and returns the
// answer line the workload put in the INIT-ACK's state cookie. It never completes the
// association: no COOKIE-ECHO follows. IPv4 only.
//
// Only an INIT-ACK from dst itself counts (through a load balancer, from the VIP after
// un-DNAT), to the INIT's port, with the INIT's tag: what a real SCTP stack would accept.
func SCTPInit(ctx context.Context, dst netip.Addr, port uint16) (string, error) {
	dst = dst.Unmap()
	if !dst.Is4() {
		return "", fmt.Errorf("probe: SCTP INIT to %s: only IPv4 is supported", dst)
	}
	c, err := net.ListenIP("ip4:132", nil)
	if err != nil {
		return "", fmt.Errorf("probe: SCTP raw socket: %w", err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()

	sport := uint16(32768 + rand.N(28000))
	tag := nonZeroTag()
	init := sctpInit{SrcPort: sport, DstPort: port, Type: chunkInit, InitiateTag: tag, InitialTSN: rand.Uint32()}.marshal()
	buf := make([]byte, 65536)
	var lastErr error // an ICMP error the kernel reported on the socket, for the final message
	for ctx.Err() == nil {
		if err := rawSend(rc, init, dst); err != nil {
			return "", fmt.Errorf("probe: SCTP INIT to %s:%d: %w", dst, port, err)
		}
		c.SetReadDeadline(time.Now().Add(sctpRetry))
		for {
			n, err := rawRecv(rc, buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				lastErr = err
				continue
			}
			src, _, proto, payload, err := ipv4Packet(buf[:n])
			if err != nil || proto != protoSCTP || src != dst {
				continue
			}
			p, err := parseSCTPInit(payload)
			if err != nil || p.Type != chunkInitAck || p.SrcPort != port || p.DstPort != sport || p.VerificationTag != tag {
				continue
			}
			return string(p.Cookie), nil
		}
	}
	if lastErr != nil {
		return "", fmt.Errorf("probe: SCTP INIT to %s:%d: no INIT-ACK: %w (last socket error: %v)", dst, port, ctx.Err(), lastErr)
	}
	return "", fmt.Errorf("probe: SCTP INIT to %s:%d: no INIT-ACK: %w", dst, port, ctx.Err())
}

func nonZeroTag() uint32 {
	for {
		// RFC 9260: an initiate tag of 0 is invalid.
		if t := rand.Uint32(); t != 0 {
			return t
		}
	}
}

// rawSend sends b (an SCTP packet, or a whole IPv4 packet on an IP_HDRINCL socket) to dst.
func rawSend(rc syscall.RawConn, b []byte, dst netip.Addr) error {
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrInet4{Addr: dst.As4()})
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	return errors.Join(err, serr)
}

// rawRecv reads one IPv4 packet, header included. It goes through the runtime's poller, so
// read deadlines apply; net.IPConn's own ReadFrom would cut the header off, and with it the
// destination address the responder must answer from.
func rawRecv(rc syscall.RawConn, buf []byte) (int, error) {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}

// sctpServer answers every INIT to one of its ports with an INIT-ACK. A raw IPPROTO_SCTP
// socket gets a copy of every SCTP packet to the namespace, so several workloads in one
// namespace (hostNetwork pods) each see every INIT and answer only for their own ports; none
// sends an ABORT for a port it does not serve, since another one may serve it.
type sctpServer struct {
	c     *net.IPConn
	rc    syscall.RawConn
	ports map[uint16]bool
	s     *Server
}

func listenSCTP(ports []uint16, s *Server) (server, error) {
	c, err := net.ListenIP("ip4:132", nil)
	if err != nil {
		return nil, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	// IP_HDRINCL: the answer must come from the address the INIT was sent to, which only a
	// header of our own guarantees when the namespace has several addresses.
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_HDRINCL, 1)
	}); err != nil || serr != nil {
		c.Close()
		return nil, errors.Join(err, serr)
	}
	srv := &sctpServer{c: c, rc: rc, ports: map[uint16]bool{}, s: s}
	for _, p := range ports {
		srv.ports[p] = true
	}
	return srv, nil
}

func (x *sctpServer) serve() {
	buf := make([]byte, 65536)
	for {
		n, err := rawRecv(x.rc, buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error reported on the socket: nothing to answer
		}
		src, dst, proto, payload, err := ipv4Packet(buf[:n])
		if err != nil || proto != protoSCTP {
			continue
		}
		p, err := parseSCTPInit(payload)
		// An INIT carries verification tag 0; anything else is not the start of an association.
		if err != nil || p.Type != chunkInit || p.VerificationTag != 0 || !x.ports[p.DstPort] {
			continue
		}
		ack := sctpInit{
			SrcPort:         p.DstPort,
			DstPort:         p.SrcPort,
			VerificationTag: p.InitiateTag,
			Type:            chunkInitAck,
			InitiateTag:     nonZeroTag(),
			InitialTSN:      rand.Uint32(),
			Cookie:          []byte(x.s.answer("sctp", p.DstPort, src)),
		}.marshal()
		rawSend(x.rc, append(ipv4Header(dst, src, protoSCTP, len(ack)), ack...), src)
	}
}

func (x *sctpServer) Close() error { return x.c.Close() }
