//go:build linux

package benchutil

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// MasterBinary is the ovnt-master to measure: $OVNT_BIN_DIR's (make builds it first), else
// one built into the run directory (cluster.BinDir).
func MasterBinary(ctx context.Context, tb testing.TB, r *harness.Run) string {
	tb.Helper()
	dir, err := cluster.BinDir(ctx, r.Path("bin"))
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, "ovnt-master")
}
