package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckChassisCert(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "node1-cert.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkChassisCert(file, "node1"); err != nil {
		t.Errorf("the certificate of node1, for chassis node1: %v", err)
	}
	// Debian's ovs-ctl left a random system-id, which the agent keeps.
	err = checkChassisCert(file, "8e6c1a4e-0d0b-4a0c-9d0e-1f2a3b4c5d6e")
	if err == nil || !strings.Contains(err.Error(), `is for "node1"`) || !strings.Contains(err.Error(), "8e6c1a4e") {
		t.Errorf("the certificate of node1, for another chassis: %v", err)
	}
	if err := checkChassisCert(filepath.Join(t.TempDir(), "missing.pem"), "node1"); err == nil {
		t.Error("a missing certificate passed")
	}
}
