package harness

import (
	"os"
	"os/exec"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// Missing returns the programs of the list that are not on PATH, and "root privileges" when
// the process is not root.
func Missing(programs ...string) []string {
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root privileges")
	}
	return missing
}

// Require stops the test when a program it needs is missing, or when it does not run as root
// (internal/testing/testenv.RequireRoot: a failure on CI, a logged skip elsewhere); under
// `go test -short` every harness test is skipped, as the integration tier.
func Require(tb testing.TB, programs ...string) {
	tb.Helper()
	testenv.RequireRoot(tb, programs...)
}
