//go:build linux

package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// PKI is a run's certificate authority: one CA made at StartOVNCentral, which signs the OVN
// databases' server certificates and every client's (the master's, each chassis'), as the
// operator's one CA does in a deployment (docs/security.md). Its files live in <run>/pki.
type PKI struct {
	Dir    string
	CACert string // the CA certificate, PEM: what every server and client trusts

	mu   sync.Mutex
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Cert is one certificate the run's CA signed: the paths of its PEM files, and of the CA's.
type Cert struct {
	CertFile, KeyFile, CAFile string
}

// newPKI makes the CA in dir.
func newPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	der, cert, key, err := newCA("ovnt test OVN CA", time.Now().Add(-time.Hour), 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CACert: filepath.Join(dir, "ca.crt"), cert: cert, key: key}
	return p, writePEM(p.CACert, "CERTIFICATE", der)
}

// IssueServer signs a server certificate with common name cn, valid for the host names and
// IP addresses in names (the names clients dial, which they check).
func (p *PKI) IssueServer(cn string, names ...string) (Cert, error) {
	return p.issue(cn, x509.ExtKeyUsageServerAuth, names)
}

// IssueClient signs a client certificate with common name cn: the master's, or a chassis'
// whose common name must be its chassis name for the SB's ovn-controller role. Issuing the
// same cn again returns the existing files.
func (p *PKI) IssueClient(cn string) (Cert, error) {
	return p.issue(cn, x509.ExtKeyUsageClientAuth, nil)
}

func (p *PKI) issue(cn string, usage x509.ExtKeyUsage, names []string) (Cert, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base := filepath.Join(p.Dir, cn)
	c := Cert{CertFile: base + ".crt", KeyFile: base + ".key", CAFile: p.CACert}
	if _, err := os.Stat(c.CertFile); err == nil {
		return c, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return Cert{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return Cert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	if err := writeCertAndKey(base, tmpl, p.cert, p.key); err != nil {
		return Cert{}, fmt.Errorf("harness: certificate %s: %w", cn, err)
	}
	return c, nil
}

// newCA makes a self-signed CA certificate valid from notBefore for lifetime, with its key.
func newCA(cn string, notBefore time.Time, lifetime time.Duration) ([]byte, *x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return der, cert, key, nil
}
