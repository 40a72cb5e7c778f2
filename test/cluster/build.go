//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBinaries builds ovnt-master, ovnt-node, ovnt-cni and ovnt-workload into dir with the
// module's own go command (the build cache makes a repeat take a second or two).
func BuildBinaries(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	for bin, pkg := range map[string]string{
		"ovnt-master":   "./cmd/ovnt-master",
		"ovnt-node":     "./cmd/ovnt-node",
		"ovnt-cni":      "./cmd/ovnt-cni",
		"ovnt-workload": "./test/cmd/ovnt-workload",
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, bin), pkg)
		cmd.Dir = root
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}
