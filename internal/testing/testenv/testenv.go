// Package testenv is how a test says what it needs from the machine. A missing program is a
// failure on CI (CI=true), where everything must be installed; elsewhere the test is skipped,
// loudly: the skip names what is missing, and when OVNT_SKIP_LOG names a file, a line is
// appended to it so that `make` can print every skipped test at the end of the run.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Integration marks a test of the integration or end-to-end tier: it needs root, network
// namespaces, an OVS or OVN daemon other than one ovsdb-server (ovs-vswitchd, ovn-controller,
// ovn-northd, a RAFT cluster) or the Kubernetes binaries, or it takes its time by design
// (certificate rotation, timeouts, a server stopped or restarted under a client). Under
// `go test -short` (make test-unit) it is skipped; that is the tier's definition, not a
// missing prerequisite, so it is not logged. make test runs it.
func Integration(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration tier: not run under -short (make test-unit)")
	}
}

// Missing returns the programs of the list that are not on PATH.
func Missing(programs ...string) []string {
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// Require stops the test when one of programs is missing (see the package comment).
func Require(tb testing.TB, programs ...string) {
	tb.Helper()
	stop(tb, Missing(programs...))
}

// RequireRoot is Require for tests that also need root (network namespaces, OVS datapaths):
// they are of the integration tier (Integration).
func RequireRoot(tb testing.TB, programs ...string) {
	tb.Helper()
	Integration(tb)
	missing := Missing(programs...)
	if os.Geteuid() != 0 {
		missing = append(missing, "root privileges")
	}
	stop(tb, missing)
}

func stop(tb testing.TB, missing []string) {
	tb.Helper()
	if len(missing) == 0 {
		return
	}
	what := strings.Join(missing, ", ")
	if os.Getenv("CI") == "true" {
		tb.Fatalf("prerequisites missing on CI: %s (make test installs them)", what)
	}
	if path := os.Getenv("OVNT_SKIP_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: missing %s\n", tb.Name(), what)
			f.Close()
		}
	}
	tb.Skipf("SKIPPED, prerequisites missing: %s (run `make deps` as root to install them)", what)
}
