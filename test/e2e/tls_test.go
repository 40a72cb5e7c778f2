//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestOVNCentralTLS (security audit C1): every node's ovn-controller reaches the SB over TLS
// with the node's own certificate, which ovnt-node wrote into the SSL row; and a pod that
// talks to the central's NB and SB ports without a certificate learns nothing (the audit had
// list_dbs answer ["OVN_Northbound"] to any pod).
func TestOVNCentralTLS(t *testing.T) {
	ctx := context.Background()
	for _, n := range cl.Nodes {
		remote, err := n.VSCtl(ctx, "get", "Open_vSwitch", ".", "external_ids:ovn-remote")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Trim(strings.TrimSpace(remote), `"`); got != cl.Central.SBChassisRemote {
			t.Errorf("%s: ovn-remote %s, want %s", n.Name, got, cl.Central.SBChassisRemote)
		}
		ssl, err := n.VSCtl(ctx, "get-ssl")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{n.SBCert.KeyFile, n.SBCert.CertFile, n.SBCert.CAFile} {
			if !strings.Contains(ssl, f) {
				t.Errorf("%s: SSL row %q lacks %s", n.Name, ssl, f)
			}
		}
		if st, err := n.AppCtl(ctx, "ovn-controller", "connection-status"); err != nil || strings.TrimSpace(st) != "connected" {
			t.Errorf("%s: ovn-controller connection-status %q %v", n.Name, st, err)
		}
	}

	ns := testNamespace(t)
	cli := startPod(t, workloadPod(ns, "client", "node1", "client"))
	netns := podNetns(t, cli)
	for _, port := range []int{harness.NBPort, harness.SBPort} {
		addr := fmt.Sprintf("%s:%d", harness.CentralIP, port)
		if dbs, err := harness.ListDBs(netns, addr, nil); err == nil {
			t.Errorf("a pod's list_dbs over plain TCP to %s answered %s", addr, dbs)
		} else {
			t.Logf("a pod's list_dbs to %s: %v", addr, err)
		}
	}
}
