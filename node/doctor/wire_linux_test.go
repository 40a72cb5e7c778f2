package doctor

// The doctor's connections as ovnt-node makes them (FromConfig), against a real local
// Open_vSwitch database and a real Southbound database.

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/node/ovstest"
)

func TestFromConfigReadsTheSBChassis(t *testing.T) {
	testenv.Require(t, "ovn-sbctl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ovstest.Start(t)
	db.Vsctl("set", "Open_vSwitch", ".", "external_ids:system-id=node1", "external_ids:ovn-remote=tcp:192.0.2.1:6642",
		"external_ids:ovn-encap-ip=192.0.2.31")
	sb := ovsdbtest.Start(t, ovsdbtest.SB)
	dir := t.TempDir()
	cfg := Config{NodeName: "node1", OVSAddress: db.Remote, OVSRunDir: dir, SBAddress: sb.Remote, CNIBinDir: dir, CNIConfDir: dir}
	chassis := func() Result {
		t.Helper()
		n, closeAll := FromConfig(ctx, cfg, 5*time.Second)
		defer closeAll()
		if n.Switch == nil {
			t.Fatalf("no switch: %v", n.SwitchErr)
		}
		for _, r := range Run(ctx, n, 2*time.Second) {
			if r.Check == "chassis" {
				return r
			}
		}
		t.Fatal("no chassis check")
		return Result{}
	}
	if r := chassis(); r.OK || !strings.Contains(r.Detail, `no chassis "node1"`) || r.Fix == "" {
		t.Errorf("chassis not in the SB: %+v, want a failure with a fix", r)
	}
	if out, err := exec.Command("ovn-sbctl", "--db="+sb.Remote, "chassis-add", "node1", "geneve", "192.0.2.31").CombinedOutput(); err != nil {
		t.Fatalf("ovn-sbctl chassis-add: %v: %s", err, out)
	}
	if r := chassis(); !r.OK {
		t.Errorf("chassis in the SB: %+v", r)
	}
	// The OpenFlow probe dials <rundir>/<bridge>.mgmt: nothing listens in this directory.
	n, closeAll := FromConfig(ctx, cfg, 5*time.Second)
	defer closeAll()
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	if err := n.OpenFlow(pctx, "br-int"); err == nil || !strings.Contains(err.Error(), dir+"/br-int.mgmt") {
		t.Errorf("OpenFlow probe of a missing socket: %v, want an error naming it", err)
	}
}
