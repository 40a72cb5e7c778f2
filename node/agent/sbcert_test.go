package agent

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
)

func TestCheckChassisCert(t *testing.T) {
	ca, err := pkitest.NewCA("chassis CA", time.Now().Add(-time.Hour), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := pkitest.Leaf("node1", x509.ExtKeyUsageClientAuth, nil, time.Now().Add(-time.Hour), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "node1-cert.pem")
	if err := ca.Sign(tmpl, file, filepath.Join(dir, "node1-privkey.pem")); err != nil {
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
	if err := checkChassisCert(filepath.Join(dir, "missing.pem"), "node1"); err == nil {
		t.Error("a missing certificate passed")
	}
}
