package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Paths of the binaries under test, built once by TestMain.
var (
	nodeBin string
	cniBin  string
	// oldRuntimeBin is test/cniruntime: a runtime's CNI calls on the libcni of containerd
	// 1.6 and 1.7 (v1.1.2), its own module.
	oldRuntimeBin string
)

func TestMain(m *testing.M) {
	if flag.Parse(); testing.Short() {
		fmt.Fprintln(os.Stderr, "node/integration: integration tier, not run under -short (make test-unit)")
		return
	}
	dir, err := os.MkdirTemp("", "ovnt-node-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin, cniBin = filepath.Join(dir, "ovnt-node"), filepath.Join(dir, "ovnt-cni")
	for bin, pkg := range map[string]string{nodeBin: "../../cmd/ovnt-node", cniBin: "../../cmd/ovnt-cni"} {
		args := []string{"build", "-o", bin}
		if os.Getenv("OVNT_TEST_RACE") != "" {
			args = append(args, "-race") // OVNT_TEST_RACE=1: the daemons report data races
		}
		out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	oldRuntimeBin = filepath.Join(dir, "cniruntime")
	cmd := exec.Command("go", "build", "-o", oldRuntimeBin, ".")
	cmd.Dir = filepath.Join("..", "..", "test", "cniruntime")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building test/cniruntime: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
