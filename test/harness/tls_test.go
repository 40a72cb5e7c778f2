//go:build linux

package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOVNOverTLS: the chassis reach the SB over TLS with the ovn-controller role, and the SB's
// RBAC holds: node1's credentials can change its own Chassis row but not node2's, nor delete
// it, and do not open the NB. A client without a certificate, or speaking plain TCP, gets nothing out of the NB or SB
// ports on the underlay, where pods and nodes could reach them.
func TestOVNOverTLS(t *testing.T) {
	Require(t, ovnPrograms...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := NewTestRun(t)
	c, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := startNodes(ctx, t, r, "node1", "node2")
	node1 := nodes[0]

	// The chassis registered through the TLS remote, not some other way.
	for _, n := range nodes {
		log, err := os.ReadFile(filepath.Join(r.LogDir, n.Name+"-ovn-controller.log"))
		if err != nil {
			t.Fatal(err)
		}
		if want := c.SBChassisRemote + ": connected"; !strings.Contains(string(log), want) {
			t.Errorf("%s's ovn-controller log has no %q", n.Name, want)
		}
	}
	if roles, err := c.SBCtl(ctx, "--bare", "--columns=name", "list", "RBAC_Role"); err != nil || strings.TrimSpace(roles) != "ovn-controller" {
		t.Errorf("SB RBAC roles: %q %v, want ovn-controller", roles, err)
	}
	if conn, err := c.SBCtl(ctx, "get-connection"); err != nil || !strings.Contains(conn, "read-write role=\"ovn-controller\" pssl:") {
		t.Errorf("SB connection: %q %v, want the ovn-controller role on pssl:", conn, err)
	}

	// ovn-sbctl with node1's files, from node1, as a thief of them would.
	asNode1 := func(args ...string) (string, error) {
		return Exec(ctx, node1.Netns, "ovn-sbctl", append([]string{"--db=" + c.SBChassisRemote, ctlTimeout,
			"--private-key=" + node1.SBCert.KeyFile, "--certificate=" + node1.SBCert.CertFile,
			"--ca-cert=" + node1.SBCert.CAFile}, args...)...)
	}
	if _, err := asNode1("set", "Chassis", "node1", "external_ids:rbac-test=own"); err != nil {
		t.Errorf("node1 cannot change its own chassis: %v", err)
	}
	for _, args := range [][]string{
		{"set", "Chassis", "node2", "external_ids:rbac-test=stolen"},
		{"chassis-del", "node2"},
	} {
		out, err := asNode1(args...)
		if err == nil {
			t.Errorf("node1's credentials: ovn-sbctl %s succeeded: %s", strings.Join(args, " "), out)
		} else if !strings.Contains(err.Error(), "RBAC rules for client \\\"node1\\\"") {
			t.Errorf("ovn-sbctl %s failed, but not on RBAC: %v", strings.Join(args, " "), err)
		}
	}
	got, err := c.SBCtl(ctx, "--bare", "--columns=name,external_ids", "find", "Chassis", "external_ids:rbac-test!=\"\"")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(got); len(got) != 2 || got[0] != "node1" || got[1] != "rbac-test=own" {
		t.Errorf("chassis with an rbac-test mark: %q, want node1's own only", got)
	}
	if chassis, err := c.SBCtl(ctx, "--bare", "--columns=name", "find", "Chassis", "name=node2"); err != nil || strings.TrimSpace(chassis) != "node2" {
		t.Errorf("node2's chassis: %q %v", chassis, err)
	}

	// The underlay ports: with node1's certificate the SB answers (the control), without a
	// certificate or without TLS neither database does.
	ca, err := os.ReadFile(c.PKI.CACert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(node1.SBCert.CertFile, node1.SBCert.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: roots, ServerName: CentralIP, Certificates: []tls.Certificate{pair}}
	if dbs, err := ListDBs(node1.Netns, fmt.Sprintf("%s:%d", CentralIP, SBPort), withCert); err != nil || !strings.Contains(dbs, "OVN_Southbound") {
		t.Fatalf("list_dbs over TLS with node1's certificate: %q %v", dbs, err)
	}
	// The NB has no RBAC: a chassis' certificate must not open it at all, or one node's
	// stolen key would rewrite every NetworkPolicy. (ovn-nbctl, whose OpenSSL sends its
	// certificate whatever CAs the server asks for; Go's client would not even send it.)
	if out, err := Exec(ctx, node1.Netns, "ovn-nbctl", "--db="+c.NBUnderlayRemote, ctlTimeout,
		"--private-key="+node1.SBCert.KeyFile, "--certificate="+node1.SBCert.CertFile,
		"--ca-cert="+node1.SBCert.CAFile, "ls-add", "stolen"); err == nil {
		t.Errorf("ovn-nbctl with node1's certificate wrote the NB: %s", out)
	} else {
		t.Logf("ovn-nbctl with node1's certificate: %v", err)
	}
	if ls, err := c.NBCtl(ctx, "ls-list"); err != nil || strings.Contains(ls, "stolen") {
		t.Errorf("NB switches: %q %v", ls, err)
	}
	for _, port := range []int{NBPort, SBPort} {
		addr := fmt.Sprintf("%s:%d", CentralIP, port)
		for what, cfg := range map[string]*tls.Config{
			"plain TCP":                 nil,
			"TLS without a certificate": {RootCAs: roots, ServerName: CentralIP},
		} {
			if dbs, err := ListDBs(node1.Netns, addr, cfg); err == nil {
				t.Errorf("list_dbs at %s over %s answered %s", addr, what, dbs)
			} else {
				t.Logf("list_dbs at %s over %s: %v", addr, what, err)
			}
		}
	}
}
