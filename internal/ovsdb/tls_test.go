package ovsdb

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// testPKI is a CA and the PEM files of certificates it signed, written in dir.
type testPKI struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CAFile is the CA certificate.
	CAFile string
}

func newTestPKI(t *testing.T, dir, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: dir, cert: cert, key: key, CAFile: filepath.Join(dir, name+"-cacert.pem")}
	p.write(p.CAFile, "CERTIFICATE", der)
	return p
}

// issue signs a certificate for name, without any host name or IP address in it, as ovs-pki
// does, and returns the paths of its certificate and private key.
func (p *testPKI) issue(name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		p.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+"-cert.pem"), filepath.Join(p.dir, name+"-privkey.pem")
	p.write(certFile, "CERTIFICATE", der)
	p.write(keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func (p *testPKI) write(path, typ string, der []byte) {
	p.t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// TestSSL connects over ssl: with certificates made here, transacts, and checks the row with
// ovn-nbctl over ssl; a server whose certificate another CA signed is refused.
func TestSSL(t *testing.T) {
	tl := needTools(t)
	dir := shortTempDir(t)
	pki := newTestPKI(t, dir, "ca")
	serverCert, serverKey := pki.issue("ovnnb", x509.ExtKeyUsageServerAuth)
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := New(ctx, testNBModel(t), cfg); err == nil {
		c.Close()
		t.Error("connected to a server whose certificate the trusted CA did not sign")
	} else if t.Log(err); !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("error %v does not mention the certificate", err)
	}
}
