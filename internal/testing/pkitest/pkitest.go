// Package pkitest makes certificate authorities and certificates for tests: ECDSA P-256 keys
// and PEM files that Go, OpenSSL (ovsdb-server, ovn-controller, the OVN CLIs) and the
// Kubernetes binaries all read.
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"time"
)

// CA is a certificate authority: its certificate (also as DER, to write) and its key.
type CA struct {
	Cert *x509.Certificate
	DER  []byte
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA with common name cn, valid from notBefore for lifetime.
func NewCA(cn string, notBefore time.Time, lifetime time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, DER: der, Key: key}, nil
}

// WriteCert writes the CA's certificate to path.
func (ca *CA) WriteCert(path string) error { return WritePEM(path, "CERTIFICATE", ca.DER) }

// Leaf is the template of a certificate with common name cn for usage, valid from notBefore
// for lifetime, for the host names and IP addresses in names (subject alternative names).
func Leaf(cn string, usage x509.ExtKeyUsage, names []string, notBefore time.Time, lifetime time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(lifetime),
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
	return tmpl, nil
}

// Sign makes a key, signs tmpl for it with the CA, and writes the certificate to certFile and
// the key to keyFile (mode 0600).
func (ca *CA) Sign(tmpl *x509.Certificate, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := WritePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	return WritePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

// WritePEM writes der as one PEM block of type typ to path, mode 0600.
func WritePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
