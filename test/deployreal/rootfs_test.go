//go:build linux

package deployreal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMmdebstrap puts on PATH an mmdebstrap that treats its target as the real one does
// (it exits 25 when the target's parent directory is missing: "unable to get absolute path
// of target directory"), and otherwise makes a root filesystem holding lib/systemd/systemd.
// Each call appends a line to the returned file.
func fakeMmdebstrap(t *testing.T) (calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := `#!/bin/sh
for a; do target=$a; done
echo "$target" >> ` + calls + `
if [ ! -d "$(dirname "$target")" ]; then
	echo "E: unable to get absolute path of target directory $target" >&2
	exit 25
fi
mkdir -p "$target/lib/systemd" && : > "$target/lib/systemd/systemd"
`
	if err := os.WriteFile(filepath.Join(dir, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls
}

// TestMachineRootfsEmptyCache makes the machines' root filesystem with an empty cache, as
// on a fresh machine: the folder it goes into is made first, and a second call finds the
// finished one without running mmdebstrap again.
func TestMachineRootfsEmptyCache(t *testing.T) {
	calls := fakeMmdebstrap(t)
	cache := filepath.Join(t.TempDir(), "cache") // not even the cache's root exists
	t.Setenv("OVNT_CACHE_DIR", cache)
	dir, err := ensureMachineRootfs(t.Context(), t.Logf)
	if err != nil {
		t.Fatalf("with an empty cache: %v", err)
	}
	if got, want := filepath.Dir(dir), filepath.Join(cache, "machines"); got != want {
		t.Errorf("root filesystem in %s, want in %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "lib", "systemd", "systemd")); err != nil {
		t.Errorf("the root filesystem has no systemd: %v", err)
	}
	again, err := ensureMachineRootfs(t.Context(), t.Logf)
	if err != nil || again != dir {
		t.Fatalf("second call: %q, %v; want %q", again, err, dir)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); len(got) != 1 || got[0] != dir+".tmp" {
		t.Errorf("mmdebstrap targets %q, want once %s.tmp", got, dir)
	}
	// Only the finished root filesystem is left in the folder.
	entries, err := os.ReadDir(filepath.Join(cache, "machines"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != filepath.Base(dir) {
		t.Errorf("cache folder holds %q, want only %s", names, filepath.Base(dir))
	}
}

// TestMachineRootfsFailureLeavesNothing: a failed mmdebstrap leaves no half-made root
// filesystem that a later run would take for a finished one.
func TestMachineRootfsFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a; do target=$a; done\nmkdir -p \"$target/lib/systemd\"\necho 'E: download failed' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cache := t.TempDir()
	t.Setenv("OVNT_CACHE_DIR", cache)
	if _, err := ensureMachineRootfs(t.Context(), t.Logf); err == nil || !strings.Contains(err.Error(), "download failed") {
		t.Fatalf("a failing mmdebstrap: err %v, want its message", err)
	}
	entries, err := os.ReadDir(filepath.Join(cache, "machines"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("after a failure the cache folder holds %d entries (%s...), want none", len(entries), entries[0].Name())
	}
}
