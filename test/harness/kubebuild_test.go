//go:build linux

package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestPackageCounter(t *testing.T) {
	c := &packageCounter{Total: 4}
	// What go build -v writes: import paths, in writes that split lines anywhere, mixed with
	// the compiler's messages.
	for _, w := range []string{"runtime\nk8s.io/api/co", "re/v1\n# example.com/broken\n", "broken/x.go:3:2: undefined: y\n", "example.com/a\n"} {
		c.Write([]byte(w))
	}
	if got, want := c.progress(), "3 of 4 packages compiled"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	c.Write([]byte("example.com/b\nexample.com/c\n")) // more than the total: the main packages' links
	if got, want := c.progress(), "4 of 4 packages compiled"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	unknown := &packageCounter{}
	unknown.Write([]byte("a\nb\n"))
	if got, want := unknown.progress(), "2 packages compiled"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	var none *packageCounter
	if got, want := none.progress(), "still running"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
}

// staleDeps counts what a build will compile, and go build -v compiles that many: a module
// of three packages, one of them imported only by a test, built twice.
func TestStaleDepsMatchesWhatGoBuildCompiles(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	b := &kubeBuild{verDir: t.TempDir(), logf: t.Logf, goBin: goBin, env: kubeBuildEnv(os.Environ())}
	files := map[string]string{
		"go.mod":      "module example.test/m\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nimport \"example.test/m/b\"\n\nvar X = b.Y\n",
		"a/a_test.go": "package a\n\nimport (\n\t\"testing\"\n\n\t\"example.test/m/c\"\n)\n\nfunc TestX(t *testing.T) { _ = c.Z }\n",
		"b/b.go":      "package b\n\nimport \"strings\"\n\nvar Y = strings.ToUpper(\"y\")\n",
		"c/c.go":      "package c\n\nconst Z = 1\n",
	}
	for name, text := range files {
		path := filepath.Join(b.srcDir(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// The module's packages are new to the build cache: their directory (in the compiled
	// files' paths) is new; the flag keeps them apart from any other build all the same.
	flags := []string{"-gcflags=example.test/m/...=-N"}
	all, stale, err := b.staleDeps(ctx, true, flags, "example.test/m/a")
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, p := range all {
		if strings.HasPrefix(p, "example.test/") {
			ours = append(ours, p)
		}
	}
	sort.Strings(ours)
	if want := []string{"example.test/m/a", "example.test/m/b", "example.test/m/c"}; !reflect.DeepEqual(ours, want) {
		t.Fatalf("the module's packages listed: %q, want %q", ours, want)
	}
	compiled := &packageCounter{Total: stale}
	if _, err := b.goCmdProgress(ctx, "test build", compiled, append(append([]string{"build", "-v"}, flags...), all...)...); err != nil {
		t.Fatal(err)
	}
	if compiled.n != stale || stale < 3 {
		t.Errorf("go build compiled %d packages, staleDeps counted %d (the module's 3 at least)", compiled.n, stale)
	}
	if _, again, err := b.staleDeps(ctx, true, flags, "example.test/m/a"); err != nil || again != 0 {
		t.Errorf("after the build: %d stale (%v), want 0", again, err)
	}
}
