package chassisrelay

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client certificate "node2" into
// dir, and returns the server's TLS settings (client certificates required, of that CA) and
// the relay's (ovsdb.ClientTLS).
func pki(t *testing.T, dir, target string) (server, client *tls.Config) {
	t.Helper()
	ca, err := pkitest.NewCA("test CA", time.Now().Add(-time.Hour), time.Hour*2)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	issue := func(cn string, usage x509.ExtKeyUsage, names ...string) (string, string) {
		tmpl, err := pkitest.Leaf(cn, usage, names, time.Now().Add(-time.Hour), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		crt, key := filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
		if err := ca.Sign(tmpl, crt, key); err != nil {
			t.Fatal(err)
		}
		return crt, key
	}
	srvCrt, srvKey := issue("listener", x509.ExtKeyUsageServerAuth, "127.0.0.1")
	cliCrt, cliKey := issue("node2", x509.ExtKeyUsageClientAuth)
	pair, err := tls.LoadX509KeyPair(srvCrt, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	server = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client, err = ovsdb.ClientTLS(ovsdb.Config{PrivateKeyFile: cliKey, CertificateFile: cliCrt, CACertFile: caFile}, target)
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

func startRelay(t *testing.T, r *Relay) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("unix", r.Listen); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("relay does not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { stop() })
	return stop
}

func roundTrip(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// A relay that gives up on its upstream may close the connection before the write.
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "error: " + err.Error()
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(got)
}

// TestRelay: several connections at once, each its own TLS session with the client
// certificate; a socket file left by a killed relay is replaced; stopping closes what is
// relayed and removes the socket.
func TestRelay(t *testing.T) {
	dir := t.TempDir()
	target, clientTLS := echoTarget(t, dir)

	sock := filepath.Join(dir, "br-int.mgmt")
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, as after a SIGKILL

	stop := startRelay(t, &Relay{Listen: sock, Target: target, TLS: clientTLS, Logger: logr.Discard()})
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		want := "node2 hello " + string(rune('a'+i))
		if got := roundTrip(t, c, "hello "+string(rune('a'+i))); got != want {
			t.Errorf("connection %d: got %q, want %q", i, got, want)
		}
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want mode 0600", fi, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	conns[0].SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Errorf("after stop a relayed connection still reads (%d bytes)", n)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket after stop: %v, want gone", err)
	}
}

// echoTarget serves echoOn over TLS with a PKI of its own in dir, and returns the ssl:
// target and the client TLS settings of that PKI.
func echoTarget(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := "ssl:" + ln.Addr().String()
	serverTLS, clientTLS := pki(t, dir, target)
	echoOn(t, tls.NewListener(ln, serverTLS))
	return target, clientTLS
}

// echoOn answers every line on ln's connections with "<client CN> <line>".
func echoOn(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				cn := tc.ConnectionState().PeerCertificates[0].Subject.CommonName
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(cn + " " + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// TestRelayUpstreamRefused: a server whose certificate the relay does not trust gets no
// bytes, and ovn-controller's connection is closed (it retries on its own).
func TestRelayUpstreamRefused(t *testing.T) {
	dir := t.TempDir()
	target, _ := echoTarget(t, dir)
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o700)
	_, clientTLS := pki(t, other, target) // another CA
	sock := filepath.Join(dir, "br-int.mgmt")
	startRelay(t, &Relay{Listen: sock, Target: target, TLS: clientTLS, Logger: logr.Discard()})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := roundTrip(t, c, "hello"); !strings.HasPrefix(got, "error: ") {
		t.Errorf("through a relay that does not trust the server: got %q, want the connection closed", got)
	}
}

func TestRelayBadTarget(t *testing.T) {
	for _, tc := range []struct {
		target string
		tls    bool
	}{{"ssl:1.2.3.4:6653", false}, {"tcp:1.2.3.4:6653", true}, {"1.2.3.4:6653", false}, {"unix:/x", false}} {
		r := &Relay{Listen: filepath.Join(t.TempDir(), "s"), Target: tc.target}
		if tc.tls {
			r.TLS = &tls.Config{}
		}
		if err := r.Run(context.Background()); err == nil {
			t.Errorf("target %q (TLS %v): no error", tc.target, tc.tls)
		}
	}
}
