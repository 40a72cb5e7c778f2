// Package probe is both ends of the connectivity checks the tests make: the pod workload's
// servers (Server, run by the ovnt-workload binary inside a pod's network namespace) and the
// clients that probe them (TCP, UDP, SCTPInit).
//
// Every answer is one line, "<namespace>/<pod> <client-ip>": which backend answered, and the
// source address it saw, so a test checks load balancing and client-IP preservation (or SNAT)
// from the same probe.
//
// The clients open their socket in the calling goroutine and nowhere else: called inside
// harness.InNetns they probe from that network namespace.
package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Line is the answer of the workload named name ("<namespace>/<pod>") to a client at client.
func Line(name string, client netip.Addr) string { return name + " " + client.Unmap().String() }

// ParseLine splits an answer line into the workload name and the client address it saw.
func ParseLine(line string) (name string, client netip.Addr, err error) {
	name, ip, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return "", netip.Addr{}, fmt.Errorf("probe: answer %q is not \"<name> <client-ip>\"", line)
	}
	client, err = netip.ParseAddr(ip)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("probe: answer %q: %w", line, err)
	}
	return name, client, nil
}

// TCP connects to addr ("host:port") and returns the line the server sends, without its
// newline. Give ctx a deadline: a black-holed SYN otherwise waits for the kernel's timeout.
func TCP(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("probe: TCP %s: %w", addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("probe: TCP %s: reading the answer: %w", addr, ctxErr(ctx, err))
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// udpRetry is how long UDP waits for an answer before it sends its datagram again: a first
// datagram may be lost while ARP or a new flow's set-up completes, as a TCP SYN may, but
// UDP has no retransmission of its own.
const udpRetry = 500 * time.Millisecond

// UDP sends a datagram to addr ("host:port") until one answer comes back or ctx ends, and
// returns the answer. An ICMP port unreachable ends it at once with the error, like a TCP
// connection refused.
func UDP(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return "", fmt.Errorf("probe: UDP %s: %w", addr, err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for {
		if _, err := c.Write([]byte("probe\n")); err != nil {
			return "", fmt.Errorf("probe: UDP %s: %w", addr, err)
		}
		wait := time.Now().Add(udpRetry)
		if dl, ok := ctx.Deadline(); ok && dl.Before(wait) {
			wait = dl
		}
		c.SetReadDeadline(wait)
		n, err := c.Read(buf)
		if err == nil {
			return strings.TrimSuffix(string(buf[:n]), "\n"), nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return "", fmt.Errorf("probe: UDP %s: %w", addr, err)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("probe: UDP %s: no answer: %w", addr, ctx.Err())
		}
	}
}

// ctxErr prefers the context's error over the I/O error it caused, so callers see
// "context deadline exceeded" rather than "i/o timeout".
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
