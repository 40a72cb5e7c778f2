package harness

import (
	"os"
	"os/exec"
	"testing"
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

// Require stops the test when a program it needs is missing: on CI (CI=true) that is a
// failure, since CI must install everything; elsewhere the test is skipped with the reason.
func Require(tb testing.TB, programs ...string) {
	tb.Helper()
	missing := Missing(programs...)
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("prerequisites missing on CI: %v (make test installs them)", missing)
	}
	tb.Skipf("prerequisites missing: %v (run `make test` as root to install them)", missing)
}
