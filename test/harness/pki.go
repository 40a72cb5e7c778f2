//go:build linux

package harness

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
)

// PKI is a run's certificate authorities, made at StartOVNCentral as an operator's are in a
// deployment (docs/security.md); their files live in <run>/pki.
//
// Two CAs, because the NB has no RBAC: the main CA signs the databases' server certificates
// and the control plane's client certificates (the master's), which the NB accepts; the
// chassis CA signs only the chassis' client certificates, which the SB accepts (with its
// ovn-controller role) and the NB does not know. A node's stolen key thus opens the SB as
// that chassis, and never the NB.
type PKI struct {
	Dir string
	// CACert is the main CA's certificate: what every client checks a server against, and
	// the NB checks its clients against.
	CACert string
	// ChassisCACert is the chassis CA's certificate; SBClientCAs is the bundle of the CAs
	// the SB checks its clients against (chassis and remote controllers alike).
	ChassisCACert string
	SBClientCAs   string
	// RemoteCACert is the remote-controller CA's: it signs only the certificates of remote
	// chassis' ovn-controllers (docs/remote-chassis.md), which the SB accepts as chassis and
	// the remote nodes' listeners accept, so that no ordinary chassis' key opens those.
	RemoteCACert string

	mu                    sync.Mutex
	main, chassis, remote *pkitest.CA
}

// Cert is one certificate the run's CA signed: the paths of its PEM files, and of the CA
// certificate its holder checks servers against.
type Cert struct {
	CertFile, KeyFile, CAFile string
}

// newPKI makes the two CAs in dir.
func newPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CACert: filepath.Join(dir, "ca.crt"), ChassisCACert: filepath.Join(dir, "chassis-ca.crt"),
		SBClientCAs: filepath.Join(dir, "sb-client-cas.crt"), RemoteCACert: filepath.Join(dir, "remote-ca.crt")}
	var bundle []byte
	for _, c := range []struct {
		cn, file string
		ca       **pkitest.CA
	}{{"ovnt test OVN CA", p.CACert, &p.main}, {"ovnt test chassis CA", p.ChassisCACert, &p.chassis},
		{"ovnt test remote controller CA", p.RemoteCACert, &p.remote}} {
		ca, err := pkitest.NewCA(c.cn, time.Now().Add(-time.Hour), 7*24*time.Hour)
		if err != nil {
			return nil, err
		}
		*c.ca = ca
		if err := ca.WriteCert(c.file); err != nil {
			return nil, err
		}
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})...)
	}
	return p, os.WriteFile(p.SBClientCAs, bundle, 0o644)
}

// IssueServer signs with the main CA a server certificate with common name cn, valid for the
// host names and IP addresses in names (the names clients dial, which they check).
func (p *PKI) IssueServer(cn string, names ...string) (Cert, error) {
	return p.issue(p.main, cn, cn, x509.ExtKeyUsageServerAuth, names)
}

// IssueClient signs with the main CA a client certificate with common name cn, for the
// control plane (the master). Issuing the same cn again returns the existing files.
func (p *PKI) IssueClient(cn string) (Cert, error) {
	return p.issue(p.main, cn, cn, x509.ExtKeyUsageClientAuth, nil)
}

// IssueChassis signs with the chassis CA a client certificate for the chassis cn: its common
// name is the chassis name, which the SB's ovn-controller role checks. Issuing the same cn
// again returns the existing files.
func (p *PKI) IssueChassis(cn string) (Cert, error) {
	return p.issue(p.chassis, cn, cn, x509.ExtKeyUsageClientAuth, nil)
}

// IssueRemoteController signs with the remote-controller CA a client certificate for the
// ovn-controller of remote chassis cn (common name: the chassis name, as the SB's RBAC
// requires). Issuing the same cn again returns the existing files.
func (p *PKI) IssueRemoteController(cn string) (Cert, error) {
	return p.issue(p.remote, "remote-"+cn, cn, x509.ExtKeyUsageClientAuth, nil)
}

// issue signs a certificate with common name cn into <Dir>/<file>.crt and .key.
func (p *PKI) issue(ca *pkitest.CA, file, cn string, usage x509.ExtKeyUsage, names []string) (Cert, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base := filepath.Join(p.Dir, file)
	c := Cert{CertFile: base + ".crt", KeyFile: base + ".key", CAFile: p.CACert}
	if _, err := os.Stat(c.CertFile); err == nil {
		return c, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return Cert{}, err
	}
	tmpl, err := pkitest.Leaf(cn, usage, names, time.Now().Add(-time.Hour), 7*24*time.Hour)
	if err != nil {
		return Cert{}, err
	}
	if err := ca.Sign(tmpl, c.CertFile, c.KeyFile); err != nil {
		return Cert{}, fmt.Errorf("harness: certificate %s: %w", cn, err)
	}
	return c, nil
}
