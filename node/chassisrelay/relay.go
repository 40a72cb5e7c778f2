// Package chassisrelay carries the connections of a remote chassis' ovn-controller to its
// node (docs/remote-chassis.md): a node whose ovn-controller runs on another host.
//
// ovn-controller talks to its chassis through two connections, both of which ovn-controller
// 23.03 can only open locally:
//   - OpenFlow to br-int: it always dials unix:$OVS_RUNDIR/br-int.mgmt, the socket
//     ovs-vswitchd makes for a local client, and has no setting for another target (OVN
//     24.09 adds external_ids:ovn-bridge-remote).
//   - The Open_vSwitch database: it takes any remote, but applies its -p/-c/-C TLS files only
//     in its main loop, after it has read the database's first snapshot; with an ssl: remote
//     it never gets there ("Private key must be configured to use SSL", forever).
//
// So on the controller's host both are unix sockets in its own OVS_RUNDIR, and a Relay on
// each forwards every connection accepted, byte for byte, to a TLS connection of its own to
// the node: ovsdb-server's pssl: manager target and br-int's passive controller target.
// ovn-controller opens several OpenFlow connections (flow installation, packet-ins, feature
// probing, statistics); each gets its own upstream one, so each keeps its own session with
// ovs-vswitchd, exactly as over the local socket.
package chassisrelay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Relay forwards each connection accepted on a unix socket to Target.
type Relay struct {
	// Listen is the unix socket path ovn-controller dials: <its OVS_RUNDIR>/br-int.mgmt, or
	// the database socket it is given.
	Listen string
	// Target is the node's listener: "ssl:HOST:PORT", or "tcp:HOST:PORT" where the operator
	// chose plain TCP.
	Target string
	// TLS is the client side of an ssl: Target (ovsdb.ClientTLS); nil for tcp:.
	TLS *tls.Config
	// DialTimeout bounds one upstream connection, TLS handshake included; zero means 10 s.
	DialTimeout time.Duration
	Logger      logr.Logger
}

// Run listens on r.Listen, replacing a socket file left by an earlier relay, and relays until
// ctx ends; then it closes the listener and every relayed connection and removes the socket.
// A connection whose upstream cannot be opened is closed at once: ovn-controller then retries
// with its own backoff, as it does when ovs-vswitchd is not running.
func (r *Relay) Run(ctx context.Context) error {
	network, addr, err := r.target()
	if err != nil {
		return err
	}
	if err := removeStaleSocket(r.Listen); err != nil {
		return err
	}
	ln, err := net.Listen("unix", r.Listen)
	if err != nil {
		return fmt.Errorf("chassisrelay: %w", err)
	}
	// Only the host's root (ovn-controller) may reach the node's br-int through us.
	if err := os.Chmod(r.Listen, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("chassisrelay: %w", err)
	}
	r.Logger.Info("relaying", "listen", r.Listen, "target", r.Target)

	// A listener that fails for another reason than ctx ends the relay the same way.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	var acceptErr error
	for {
		down, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("chassisrelay: accept: %w", err)
				cancel()
			}
			break
		}
		track(down, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer track(down, false)
			r.relay(ctx, down, network, addr, track)
		}()
	}
	wg.Wait()
	os.Remove(r.Listen)
	return acceptErr
}

// target splits r.Target into the network to dial and the address.
func (r *Relay) target() (network, addr string, err error) {
	scheme, addr, _ := strings.Cut(r.Target, ":")
	if _, _, err := net.SplitHostPort(addr); err != nil || (scheme != "ssl" && scheme != "tcp") {
		return "", "", fmt.Errorf("chassisrelay: target %q: want ssl:HOST:PORT or tcp:HOST:PORT", r.Target)
	}
	if (scheme == "ssl") != (r.TLS != nil) {
		return "", "", fmt.Errorf("chassisrelay: target %q: TLS settings are needed with ssl: and only with it", r.Target)
	}
	return scheme, addr, nil
}

// relay opens the upstream connection for down and copies both ways until either side
// closes; then it closes both (neither OpenFlow nor OVSDB uses a half-closed connection).
func (r *Relay) relay(ctx context.Context, down net.Conn, network, addr string, track func(net.Conn, bool)) {
	defer down.Close()
	start := time.Now()
	up, err := r.dial(ctx, network, addr)
	if err != nil {
		r.Logger.Error(err, "upstream connection failed; closing ovn-controller's", "target", r.Target)
		return
	}
	track(up, true)
	defer track(up, false)
	defer up.Close()
	r.Logger.V(2).Info("connection relayed", "target", r.Target, "local", up.LocalAddr().String(), "setup", time.Since(start))
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	down.Close()
	up.Close()
	<-done
	r.Logger.V(2).Info("connection closed", "target", r.Target, "local", up.LocalAddr().String(), "lasted", time.Since(start))
}

func (r *Relay) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	timeout := r.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Keep-alives find a peer that vanished (a node rebooted behind a NAT); ovs-vswitchd's
	// own inactivity probe on the controller target finds a hung ovn-controller.
	d := net.Dialer{KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("chassisrelay: %s: %w", r.Target, err)
	}
	if network == "tcp" {
		return c, nil
	}
	tc := tls.Client(c, r.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("chassisrelay: %s: TLS: %w", r.Target, err)
	}
	return tc, nil
}

// removeStaleSocket removes a socket file at path (left by a relay that was killed); any
// other kind of file there is an error, not removed.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chassisrelay: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("chassisrelay: %s exists and is not a socket", path)
	}
	return os.Remove(path)
}
