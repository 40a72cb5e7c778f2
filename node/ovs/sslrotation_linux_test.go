package ovs

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// ovn-controller (OVN 23.03 here) reads the key and certificate the SSL row names again when
// they are replaced in place, at its next connection, without a restart: an SB that trusts
// only a new CA refuses the chassis until its files are replaced by the new CA's, and then
// the chassis registers. docs/security.md (Rotation) rests on this; the agent writes the row
// once (EnsureSSL) and leaves the files to the operator.
func TestOVNControllerPicksUpRotatedCertificate(t *testing.T) {
	testenv.Integration(t)
	testenv.Require(t, "ovn-controller", "ovn-sbctl", "ovsdb-server", "ovsdb-tool")
	dir, err := os.MkdirTemp("", "ovnt-rot") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pki := func(name string) *pkitest.CA {
		ca, err := pkitest.NewCA(name, time.Now().Add(-time.Hour), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.WriteCert(filepath.Join(dir, name+".pem")); err != nil {
			t.Fatal(err)
		}
		return ca
	}
	issue := func(ca *pkitest.CA, cn string, usage x509.ExtKeyUsage, cert, key string, sans ...string) {
		tmpl, err := pkitest.Leaf(cn, usage, sans, time.Now().Add(-time.Hour), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.Sign(tmpl, cert, key); err != nil {
			t.Fatal(err)
		}
	}
	oldCA, newCA := pki("old-ca"), pki("new-ca")
	// The SB trusts only the new CA.
	sbCert, sbKey := filepath.Join(dir, "sb-cert.pem"), filepath.Join(dir, "sb-key.pem")
	issue(newCA, "sb", x509.ExtKeyUsageServerAuth, sbCert, sbKey, "127.0.0.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	sbDB, sbSock := filepath.Join(dir, "sb.db"), filepath.Join(dir, "sb.sock")
	if out, err := exec.Command("ovsdb-tool", "create", sbDB, ovsdbtest.SB.Path()).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool: %v: %s", err, out)
	}
	sb := exec.Command("ovsdb-server", sbDB, "--remote=punix:"+sbSock, fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port),
		"--private-key="+sbKey, "--certificate="+sbCert, "--ca-cert="+filepath.Join(dir, "new-ca.pem"),
		"--unixctl="+filepath.Join(dir, "sb.ctl"), "--no-chdir", "-vconsole:off", "--log-file="+filepath.Join(dir, "sb.log"))
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Process.Kill(); sb.Wait() })
	if err := ovsdbtest.WaitForSocket(sbSock, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// The node: its certificate from the old CA, named by the SSL row as EnsureSSL writes it.
	cert, key := filepath.Join(dir, "node-cert.pem"), filepath.Join(dir, "node-key.pem")
	issue(oldCA, "chassis1", x509.ExtKeyUsageClientAuth, cert, key)
	remote, vsctl := startDB(t)
	vsctl("set", "Open_vSwitch", ".", "external_ids:system-id=chassis1", fmt.Sprintf("external_ids:ovn-remote=ssl:127.0.0.1:%d", port),
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.1")
	sw := connect(t, remote)
	if err := sw.EnsureSSL(context.Background(), SSL{PrivateKey: key, Certificate: cert, CACert: filepath.Join(dir, "new-ca.pem")}); err != nil {
		t.Fatal(err)
	}
	oc := exec.Command("ovn-controller", remote, "--no-chdir", "-vconsole:off", "--log-file="+filepath.Join(dir, "ovn-controller.log"),
		"--pidfile="+filepath.Join(dir, "ovn-controller.pid"))
	// OVN_RUNDIR too: ovn-controller puts its control socket there, and /var/run/ovn exists
	// only where a packaged ovn-controller has run (not on a fresh machine without systemd).
	oc.Env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVN_RUNDIR="+dir)
	if err := oc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oc.Process.Kill(); oc.Wait() })
	chassis := func() string {
		out, err := exec.Command("ovn-sbctl", "--db=unix:"+sbSock, "--no-leader-only", "--bare", "--columns=name", "list", "Chassis").CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-sbctl: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// Refused: the old CA's certificate. Wait for a refusal in its log, then check.
	poll.Eventually(t, context.Background(), "ovn-controller refused by the SB", 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		b, _ := os.ReadFile(filepath.Join(dir, "ovn-controller.log"))
		return strings.Contains(string(b), "connection dropped"), nil
	})
	if got := chassis(); got != "" {
		t.Fatalf("the SB took the old CA's chassis %q", got)
	}

	// Rotation: the new CA's certificate and key, written beside and renamed into place.
	issue(newCA, "chassis1", x509.ExtKeyUsageClientAuth, cert+".new", key+".new")
	for _, f := range []string{key, cert} {
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
	poll.Eventually(t, context.Background(), "the chassis registered with the rotated certificate", time.Minute, 200*time.Millisecond, func() (bool, error) {
		return chassis() == "chassis1", nil
	})
}
