package ovsdb

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// testPKI is a CA and the PEM files of certificates it signed, written in dir.
type testPKI struct {
	t   *testing.T
	dir string
	ca  *pkitest.CA
	// CAFile is the CA certificate.
	CAFile string
}

func newTestPKI(t *testing.T, dir, name string) *testPKI {
	t.Helper()
	ca, err := pkitest.NewCA(name, time.Now().Add(-time.Hour), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: dir, ca: ca, CAFile: filepath.Join(dir, name+"-cacert.pem")}
	if err := ca.WriteCert(p.CAFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue signs a certificate with common name name for the subject alternative names sans
// (IP addresses or DNS names), and returns the paths of its certificate and private key.
func (p *testPKI) issue(name string, usage x509.ExtKeyUsage, sans ...string) (certFile, keyFile string) {
	p.t.Helper()
	tmpl, err := pkitest.Leaf(name, usage, sans, time.Now().Add(-time.Hour), 2*time.Hour)
	if err != nil {
		p.t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+"-cert.pem"), filepath.Join(p.dir, name+"-privkey.pem")
	if err := p.ca.Sign(tmpl, certFile, keyFile); err != nil {
		p.t.Fatal(err)
	}
	return certFile, keyFile
}

// TestSSL connects over ssl: with certificates made here, transacts, and checks the row with
// ovn-nbctl over ssl; a server whose certificate another CA signed is refused.
func TestSSL(t *testing.T) {
	tl := needTools(t)
	dir := shortTempDir(t)
	pki := newTestPKI(t, dir, "ca")
	serverCert, serverKey := pki.issue("ovnnb", x509.ExtKeyUsageServerAuth, "127.0.0.1")
	clientCert, clientKey := pki.issue("ovnt-master", x509.ExtKeyUsageClientAuth)

	s := newStandalone(t, tl, dir, "nb", "--remote=pssl:0:127.0.0.1",
		"--private-key="+serverKey, "--certificate="+serverCert, "--ca-cert="+pki.CAFile)
	s.start()
	remote := fmt.Sprintf("ssl:127.0.0.1:%d", s.boundPort())
	cfg := Config{
		PrivateKeyFile: clientKey, CertificateFile: clientCert, CACertFile: pki.CAFile,
		Tables: allTables(),
	}

	c := newClient(t, remote, cfg)
	uuid := insertSwitches(t, c, &testLS{Name: "over-ssl"})[0]
	poll.Eventually(t, context.Background(), "switch over-ssl in the cache", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		got := cachedSwitches(t, c)
		return got[uuid].Name == "over-ssl", fmt.Errorf("cache %v", got)
	})
	list := run(t, dir, tl.nbctl, "--db="+remote, "--private-key="+clientKey, "--certificate="+clientCert,
		"--ca-cert="+pki.CAFile, "ls-list")
	if want := uuid + " (over-ssl)"; !strings.Contains(list, want) {
		t.Errorf("ovn-nbctl ls-list over ssl:\n%s\nwant %q", list, want)
	}

	// The same client files, but trusting only another CA: the server must be refused.
	other := newTestPKI(t, dir, "other-ca")
	cfg.CACertFile = other.CAFile
	cfg.Remotes = remote
	// New retries until ctx ends and reports the last attempt that ended on its own: 2 s
	// let one end on a busy machine (with 1 s, 2 runs in 10 saw only a cut dial).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := New(ctx, testNBModel(t), cfg); err == nil {
		c.Close()
		t.Error("connected to a server whose certificate the trusted CA did not sign")
	} else if t.Log(err); !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("error %v does not mention the certificate", err)
	}
}

// TestSSLServerName: the client checks that the server's certificate names the host of the
// ssl: remote it dialled. A certificate the trusted CA signed for another host is refused.
func TestSSLServerName(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	pki := newTestPKI(t, dir, "ca")
	clientCert, clientKey := pki.issue("ovnt-master", x509.ExtKeyUsageClientAuth)
	// The wrong server: a certificate of the same CA naming another address and a service,
	// as a stolen node or test certificate would.
	wrongCert, wrongKey := pki.issue("wrong", x509.ExtKeyUsageServerAuth, "192.0.2.1", "elsewhere")
	rightCert, rightKey := pki.issue("right", x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost")
	wrong := newStandalone(t, tl, dir, "wrong", "--remote=pssl:0:127.0.0.1",
		"--private-key="+wrongKey, "--certificate="+wrongCert, "--ca-cert="+pki.CAFile)
	wrong.start()
	right := newStandalone(t, tl, dir, "right", "--remote=pssl:0:127.0.0.1",
		"--private-key="+rightKey, "--certificate="+rightCert, "--ca-cert="+pki.CAFile)
	right.start()
	cfg := Config{
		PrivateKeyFile: clientKey, CertificateFile: clientCert, CACertFile: pki.CAFile,
		Tables: allTables(), ReconnectTimeout: time.Second, Logger: testLogger(t),
	}

	refused := func(remote, serverName, why string) {
		t.Helper()
		cfg := cfg
		cfg.Remotes, cfg.ServerName = remote, serverName
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if c, err := New(ctx, testNBModel(t), cfg); err == nil {
			c.Close()
			t.Errorf("connected to %s (server name %q) although %s", remote, serverName, why)
		} else if t.Log(err); !strings.Contains(err.Error(), "does not name the server") {
			t.Errorf("error %v does not say the certificate names another server", err)
		}
	}
	accepted := func(remote, serverName string) {
		t.Helper()
		cfg := cfg
		cfg.ServerName = serverName
		c := newClient(t, remote, cfg)
		insertSwitches(t, c, &testLS{Name: fmt.Sprintf("via-%s-%s", remote, serverName)})
	}
	wrongPort, rightPort := wrong.boundPort(), right.boundPort()

	// By default the name is the remote's host: an address ...
	refused(fmt.Sprintf("ssl:127.0.0.1:%d", wrongPort), "", "the certificate names 192.0.2.1 and elsewhere")
	accepted(fmt.Sprintf("ssl:127.0.0.1:%d", rightPort), "")
	// ... or a DNS name.
	refused(fmt.Sprintf("ssl:localhost:%d", wrongPort), "", "the certificate does not name localhost")
	accepted(fmt.Sprintf("ssl:localhost:%d", rightPort), "")
	// Config.ServerName replaces the host: the certificate must name it, whatever the host.
	accepted(fmt.Sprintf("ssl:127.0.0.1:%d", wrongPort), "elsewhere")
	refused(fmt.Sprintf("ssl:127.0.0.1:%d", rightPort), "ovnnb", "the certificate does not name ovnnb")
}

// TestSSLRotation: the client reads its key, certificate and CA certificate again on every
// reconnection. The server is restarted with a certificate of a new CA, and the client's
// three files are replaced in place by the new CA's: the client reconnects without a restart.
func TestSSLRotation(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	files := map[string]string{} // role -> fixed path the server and client are given
	for _, role := range []string{"server-cert", "server-key", "server-ca", "client-cert", "client-key", "client-ca"} {
		files[role] = filepath.Join(dir, role+".pem")
	}
	install := func(caName string) {
		pki := newTestPKI(t, dir, caName)
		sc, sk := pki.issue(caName+"-server", x509.ExtKeyUsageServerAuth, "127.0.0.1")
		cc, ck := pki.issue(caName+"-client", x509.ExtKeyUsageClientAuth)
		for role, src := range map[string]string{"server-cert": sc, "server-key": sk, "server-ca": pki.CAFile,
			"client-cert": cc, "client-key": ck, "client-ca": pki.CAFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(files[role], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("old-ca")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := newStandalone(t, tl, dir, "nb", fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port),
		"--private-key="+files["server-key"], "--certificate="+files["server-cert"], "--ca-cert="+files["server-ca"])
	s.start()
	c := newClient(t, fmt.Sprintf("ssl:127.0.0.1:%d", port), Config{
		PrivateKeyFile: files["client-key"], CertificateFile: files["client-cert"], CACertFile: files["client-ca"],
		Tables: allTables(),
	})
	insertSwitches(t, c, &testLS{Name: "before"})

	install("new-ca")
	s.kill()
	s.start()
	ops, err := c.Create(&testLS{Name: "after"})
	if err != nil {
		t.Fatal(err)
	}
	// A transaction sent before the client noticed the restart fails with ErrNotConnected.
	poll.Eventually(t, context.Background(), "a transaction over the new CA's certificates", 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := Transact(ctx, c, ops...)
		return err == nil, err
	})
}
