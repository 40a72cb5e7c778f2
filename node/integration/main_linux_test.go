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
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
