//go:build linux

package deployreal

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestMachineCredentials checks that a machine runs a unit the way the master role's
// ovnt-master.service runs: an unprivileged DynamicUser reading a root-only file through
// LoadCredential. It failed on machines whose mounts had private propagation (systemd in a
// container leaves "/" as it finds it, and the credentials it mounts never reached the unit).
func TestMachineCredentials(t *testing.T) {
	requireMachines(t)
	rootfs := machineRootfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	a, pub := newController(ctx, t, r)
	m, err := startMachine(ctx, r, "cred1", rootfs, pub)
	if err != nil {
		t.Fatal(err)
	}
	a.ssh(ctx, m, "sh", "-c", "umask 077; echo secret > /root/secret")
	// One argument: ssh hands the command line to the machine's shell.
	out, err := a.sshCmd(ctx, m, `systemd-run --wait --pipe -p DynamicUser=yes -p LoadCredential=s:/root/secret `+
		`sh -c 'id; ls -la "$CREDENTIALS_DIRECTORY"; cat "$CREDENTIALS_DIRECTORY/s"'`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "secret") {
		t.Logf("propagation of the machine's mounts: %s", a.trySSH(ctx, m, "findmnt", "-o", "TARGET,PROPAGATION", "-R", "/run"))
		t.Fatalf("a DynamicUser unit cannot read its credential (%v): %s", err, out)
	}
}
