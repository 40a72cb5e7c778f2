package kubelet

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// WorkloadPackage is the import path of the workload binary every pod runs.
const WorkloadPackage = "github.com/ovn-transparent/ovn-transparent/test/cmd/ovnt-workload"

// BuildWorkload builds the ovnt-workload binary into dir and returns its path. It runs
// `go build` (from the build cache when nothing changed, about a second), so the current
// directory must be inside this module, as it is for `go test`.
func BuildWorkload(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "ovnt-workload")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, WorkloadPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", WorkloadPackage, err, out)
	}
	return bin, nil
}
