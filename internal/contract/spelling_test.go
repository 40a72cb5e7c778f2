package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// spellings are the values this package owns, as they would look spelt out in a string
// literal elsewhere. Each one spelt on one side only is a rename that compiles, passes that
// side's tests and breaks the data path.
var spellings = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\bGR_`), "GatewayRouter"},
	{regexp.MustCompile(`\bext_`), "ExternalSwitch"},
	{regexp.MustCompile(`breth0_`), "LocalnetPort"},
	{regexp.MustCompile(`(^|[^\w.])k8s-`), "ManagementPort or MgmtIfName"},
	{regexp.MustCompile(`ovn_cluster_router`), "ClusterRouter"},
	{regexp.MustCompile(`^join$`), "JoinSwitch"},
	{regexp.MustCompile(`\b(rtos|stor|rtoj|jtor|rtoe|etor)-`), "the router port names (NodeRouterPort ...)"},
	{regexp.MustCompile(`^_$`), "PodPort (<namespace>_<pod>)"},
	{regexp.MustCompile(`\bphysnet\b`), "PhysicalNetwork"},
	{regexp.MustCompile(`\b169\.254\.100\.1\b`), "NodePortGatewayIP"},
}

// spellingExceptions are literals that may stay, by file (slash-separated, from the
// repository root) and literal value, each with its reason. An exception that no longer
// matches anything fails the test, so the list cannot outlive its reasons.
var spellingExceptions = map[[2]string]string{
	{"cmd/ovnt-master/run.go", "_"}: "the leader election identity <host>_<uuid>, not a row name",
}

// TestNoSpellingOutsideContract fails when the binaries' code (master/, node/, cmd/; not
// their unit tests, which may assert on the literal names) spells a name, address or
// constant of this package in a string literal instead of using it. node/integration's
// tests are walked too: they play the master's part, and a copy of its names there would
// keep passing after the master changed them.
func TestNoSpellingOutsideContract(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	used := map[[2]string]bool{}
	files := 0
	for _, dir := range []string{"master", "node", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "node/integration/") {
				return nil
			}
			files++
			for _, lit := range stringLiterals(t, path) {
				for _, s := range spellings {
					if !s.re.MatchString(lit.value) {
						continue
					}
					if key := [2]string{rel, lit.value}; spellingExceptions[key] != "" {
						used[key] = true
						continue
					}
					t.Errorf("%s:%d: %q spells %s: use internal/contract", rel, lit.line, lit.value, s.what)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// master/topology alone has several files: a wrong root would find none and pass.
	if files < 50 {
		t.Fatalf("walked %d files under %s: not the repository?", files, root)
	}
	for key, why := range spellingExceptions {
		if !used[key] {
			t.Errorf("exception %q in %s (%s) matches nothing any more: remove it", key[1], key[0], why)
		}
	}
}

type literal struct {
	value string
	line  int
}

// stringLiterals returns the values of the string literals of a Go file, whatever its build
// constraints.
func stringLiterals(t *testing.T, path string) []literal {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	ast.Inspect(f, func(n ast.Node) bool {
		// Import paths are literals too, and name packages, not rows.
		if _, ok := n.(*ast.ImportSpec); ok {
			return false
		}
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
		}
		out = append(out, literal{v, fset.Position(lit.Pos()).Line})
		return true
	})
	return out
}
