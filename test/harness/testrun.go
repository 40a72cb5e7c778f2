//go:build linux

package harness

import (
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// NewTestRun starts a run for one test: its log lines go to t.Logf, and when the test ends the
// run is closed, after printing the daemons' logs if the test failed.
func NewTestRun(t testing.TB) *Run {
	t.Helper()
	testenv.Integration(t)
	r, err := NewRun(Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			r.MarkFailed()
		}
		if err := r.Close(); err != nil {
			t.Errorf("closing run %s: %v", r.ID, err)
		}
	})
	return r
}
