//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDir returns the directory holding ovnt-master, ovnt-node, ovnt-cni, ovnt-workload and pause:
// $OVNT_BIN_DIR when set (make sets it to the binaries it has just built), else dir, after
// building them there. It is the one way tests and benchmarks find the binaries.
func BinDir(ctx context.Context, dir string) (string, error) {
	if env := os.Getenv("OVNT_BIN_DIR"); env != "" {
		return env, nil
	}
	if err := BuildBinaries(ctx, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// BuildBinaries builds ovnt-master, ovnt-node, ovnt-cni, ovnt-workload and pause into dir with the
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
		"pause":         "./test/cmd/pause",
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
