package controller

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// masterFloors are the packages of master/ by floor: a package builds on the floors below
// its own, never on its own or one above (the rows it writes are decided below it, the
// order it writes them in above). A new package of master/ takes its place here.
var masterFloors = [][]string{
	{"nb", "ipam"},
	{"topology", "services", "netpol"},
	{"controller"},
}

// TestMasterImportGraph: `go list -deps` of every master package finds only master packages
// of lower floors.
func TestMasterImportGraph(t *testing.T) {
	testenv.Require(t, "go")
	const prefix = "github.com/ovn-transparent/ovn-transparent/master/"
	floor := map[string]int{}
	for i, f := range masterFloors {
		for _, p := range f {
			floor[prefix+p] = i
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, prefix+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		if !strings.HasPrefix(pkg, prefix) {
			continue
		}
		seen++
		f, ok := floor[pkg]
		if !ok {
			t.Errorf("%s has no floor in masterFloors", pkg)
			continue
		}
		for _, d := range deps {
			if df, ours := floor[d]; ours && df >= f {
				t.Errorf("%s (floor %d) depends on %s (floor %d)", pkg, f, d, df)
			} else if !ours && strings.HasPrefix(d, prefix) {
				t.Errorf("%s depends on %s, which has no floor", pkg, d)
			}
		}
	}
	if want := len(slices.Concat(masterFloors...)); seen != want {
		t.Errorf("go list found %d master packages, masterFloors has %d", seen, want)
	}
}
