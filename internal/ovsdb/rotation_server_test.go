package ovsdb

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// ovsdb-server (OVS 3.1 here) picks up a certificate and key replaced in place, given on
// its command line, for every new connection, without a restart: OVS's TLS library
// reloads a file whose modification time changed when the server hands it the file names
// again, which it does in its main loop. docs/security.md (Rotation) rests on this.
func TestServerPicksUpRotatedCertificate(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	pki := newTestPKI(t, dir, "ca")
	certFile, keyFile := filepath.Join(dir, "server-cert.pem"), filepath.Join(dir, "server-key.pem")
	install := func(name string) *x509.Certificate {
		c, k := pki.issue(name, x509.ExtKeyUsageServerAuth, "127.0.0.1")
		for src, dst := range map[string]string{c: certFile, k: keyFile} {
			// Written beside and renamed, as the roles and the kubelet do.
			if err := os.WriteFile(dst+".new", mustRead(t, src), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".new", dst); err != nil {
				t.Fatal(err)
			}
		}
		cert, err := tls.X509KeyPair(mustRead(t, c), mustRead(t, k))
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	first := install("first")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// The server asks for a client certificate of this CA.
	client, clientKey := pki.issue("client", x509.ExtKeyUsageClientAuth)
	s := newStandalone(t, tl, dir, "nb", fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port),
		"--private-key="+keyFile, "--certificate="+certFile, "--ca-cert="+pki.CAFile)
	s.start()
	pair, err := tls.LoadX509KeyPair(client, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, pki.CAFile))
	served := func() (*x509.Certificate, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
		c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
	}
	var got *x509.Certificate
	deadline := time.Now().Add(30 * time.Second)
	for got, err = served(); err != nil && time.Now().Before(deadline); got, err = served() {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || got.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("first connection: %v, serial %v, want %v", err, got, first.SerialNumber)
	}
	// A modification time the server has not seen yet (files within one second of each
	// other could share one on a coarse clock).
	time.Sleep(1100 * time.Millisecond)
	second := install("second")
	deadline = time.Now().Add(30 * time.Second)
	for {
		got, err = served()
		if err == nil && got.SerialNumber.Cmp(second.SerialNumber) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the rotation new connections still get %v (err %v), want serial %v", got.SerialNumber, err, second.SerialNumber)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
