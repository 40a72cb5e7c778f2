package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// A clone of this repository is all a reader has: every link and path a document gives must
// lead somewhere inside it. These tests read every *.md file and every Go comment of the
// repository.

// repoRoot is the repository's top directory (go test runs in docs/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// skipDirs are not part of the repository's documents: version control and build output.
var skipDirs = map[string]bool{".git": true, "_output": true}

// files returns the repository's files whose name ends with ext, relative to root.
func files(t *testing.T, root, ext string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ext) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mdLine is one line of a markdown file outside or inside a fenced code block.
type mdLine struct {
	n      int
	text   string
	fenced bool
}

var fenceRE = regexp.MustCompile("^\\s{0,3}(```|~~~)")

func readMarkdown(t *testing.T, path string) []mdLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []mdLine
	fence := ""
	for i, l := range strings.Split(string(b), "\n") {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			switch fence {
			case "":
				fence = m[1]
			case m[1]:
				fence = ""
			}
			out = append(out, mdLine{i + 1, l, true})
			continue
		}
		out = append(out, mdLine{i + 1, l, fence != ""})
	}
	return out
}

var (
	codeSpanRE = regexp.MustCompile("`[^`\n]+`")
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	schemeRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	headingRE  = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
)

// anchors returns the anchors GitHub gives the headings of a markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	count := map[string]int{}
	for _, l := range readMarkdown(t, path) {
		if l.fenced {
			continue
		}
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := count[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, letters, digits, '-' and '_' kept, spaces
// become '-', everything else dropped.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// inside resolves target, relative to dir (or to root when it starts with "/"), and reports
// whether it stays inside root.
func inside(root, dir, target string) (string, bool) {
	var abs string
	if strings.HasPrefix(target, "/") {
		abs = filepath.Join(root, target)
	} else {
		abs = filepath.Join(root, dir, target)
	}
	rel, err := filepath.Rel(root, abs)
	return abs, err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchorCache[path]; ok {
			return a
		}
		a := anchors(t, path)
		anchorCache[path] = a
		return a
	}
	checked := 0
	for _, md := range files(t, root, ".md") {
		for _, l := range readMarkdown(t, filepath.Join(root, md)) {
			if l.fenced {
				continue
			}
			text := codeSpanRE.ReplaceAllString(l.text, "``")
			var targets []string
			for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
				targets = append(targets, m[1])
			}
			if m := refDefRE.FindStringSubmatch(text); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if schemeRE.MatchString(target) {
					continue // http, https, mailto: not ours to check offline
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				where := md + ":" + itoa(l.n)
				dest := filepath.Join(root, md)
				if path != "" {
					abs, ok := inside(root, filepath.Dir(md), path)
					if !ok {
						t.Errorf("%s: link %q points outside the repository", where, target)
						continue
					}
					if _, err := os.Stat(abs); err != nil {
						t.Errorf("%s: link %q: %v", where, target, err)
						continue
					}
					dest = abs
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
					rel, _ := filepath.Rel(root, dest)
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", where, target, rel, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found in any *.md file: the scan is broken")
	}
}

// goPathRE finds a ../ path in a Go comment.
var goPathRE = regexp.MustCompile(`(?:\.\./)+[A-Za-z0-9_./-]*`)

func TestGoCommentPaths(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	for _, file := range files(t, root, ".go") {
		f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				for _, m := range goPathRE.FindAllString(c.Text, -1) {
					target := strings.TrimRight(m, ".")
					where := fset.Position(c.Pos())
					rel, _ := filepath.Rel(root, where.Filename)
					abs, ok := inside(root, filepath.Dir(file), target)
					if !ok {
						t.Errorf("%s:%d: %q points outside the repository", rel, where.Line, target)
						continue
					}
					if _, err := os.Stat(abs); err != nil {
						t.Errorf("%s:%d: %q: %v", rel, where.Line, target, err)
					}
				}
			}
		}
	}
}

// The design brief and the recipes once lived beside the repository, in a "shared" folder a
// clone does not have; what the repository needs of them is now inside it. A mention of them
// is a reference a reader cannot follow.
var outsideRE = regexp.MustCompile(`\.\./shared\b|\bshared/recipes\b|\bARCHITECTURE\.md\b|\bSTYLE\.md\b`)

func TestNoReferenceToOutsideDocuments(t *testing.T) {
	root := repoRoot(t)
	for _, md := range files(t, root, ".md") {
		for _, l := range readMarkdown(t, filepath.Join(root, md)) {
			if m := outsideRE.FindString(l.text); m != "" {
				t.Errorf("%s:%d: %q is outside the repository (docs/architecture.md, docs/development.md, test/recipe)", md, l.n, m)
			}
		}
	}
	fset := token.NewFileSet()
	for _, file := range files(t, root, ".go") {
		f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			continue // reported by TestGoCommentPaths
		}
		for _, cg := range f.Comments {
			if m := outsideRE.FindString(cg.Text()); m != "" {
				t.Errorf("%s:%d: comment names %q, which is outside the repository (docs/architecture.md, docs/development.md, test/recipe)",
					file, fset.Position(cg.Pos()).Line, m)
			}
		}
	}
}

// Paths in backticks that start at a top-level directory ("node/gateway",
// "master/services/README.md", "ovsdb-models/{nbdb,sbdb}") and package paths in commands
// ("go test ./node/hns/") must exist: a package that moved leaves its old path in the prose.
var (
	topDirs       = []string{"ansible", "cmd", "docs", "hack", "images", "internal", "master", "node", "ovsdb-models", "test"}
	repoPathRE    = regexp.MustCompile(`^(?:` + strings.Join(topDirs, "|") + `)/[A-Za-z0-9_./{},*-]*$`)
	commandPathRE = regexp.MustCompile(`(?:^|[\s=])\./((?:` + strings.Join(topDirs, "|") + `)/[A-Za-z0-9_./-]*)`)
	lineSuffixRE  = regexp.MustCompile(`:\d[\d,-]*$`)
	braceRE       = regexp.MustCompile(`\{([^{}]*)\}`)
)

// notInTree are paths documents name that are not in the tree on purpose, with the reason.
var notInTree = map[string]string{
	"ansible/files": "made by the operator: the ServiceAccount kubeconfigs the playbooks copy (ansible/README.md)",
}

// pending are paths the documents name that other branches of the same restructuring add;
// the test fails once one exists, so that the entry is removed and the path checked again.
var pending = map[string]string{}

// expand returns the paths a written path stands for: {a,b} alternatives expanded.
func expand(p string) []string {
	m := braceRE.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
		out = append(out, expand(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

func exists(root, dir, p string) bool {
	for _, base := range []string{root, filepath.Join(root, dir)} {
		full := filepath.Join(base, p)
		if strings.Contains(p, "*") {
			if m, _ := filepath.Glob(full); len(m) > 0 {
				return true
			}
			continue
		}
		if _, err := os.Stat(full); err == nil {
			return true
		}
	}
	return false
}

func TestMarkdownRepoPaths(t *testing.T) {
	root := repoRoot(t)
	for p := range pending {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s exists now: remove it from pending in docs/links_test.go", p)
		}
	}
	check := func(where, dir, written string) {
		p := lineSuffixRE.ReplaceAllString(written, "")
		p = strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/")
		for _, q := range expand(p) {
			if _, ok := notInTree[q]; ok {
				continue
			}
			if _, ok := pending[q]; ok {
				continue
			}
			if !exists(root, dir, q) {
				t.Errorf("%s: %q is not in the repository (moved or renamed?)", where, written)
			}
		}
	}
	checked := 0
	for _, md := range files(t, root, ".md") {
		dir := filepath.Dir(md)
		for _, l := range readMarkdown(t, filepath.Join(root, md)) {
			where := md + ":" + itoa(l.n)
			if l.fenced {
				for _, m := range commandPathRE.FindAllStringSubmatch(l.text, -1) {
					checked++
					check(where, "", m[1])
				}
				continue
			}
			for _, span := range codeSpanRE.FindAllString(l.text, -1) {
				s := strings.Trim(span, "`")
				if !repoPathRE.MatchString(s) {
					continue
				}
				checked++
				check(where, dir, s)
			}
		}
	}
	if checked == 0 {
		t.Error("no repository path found in any *.md file: the scan is broken")
	}
}

func TestExpand(t *testing.T) {
	got := expand("ovsdb-models/{nbdb,sbdb}/{a,b}.go")
	want := []string{"ovsdb-models/nbdb/a.go", "ovsdb-models/nbdb/b.go", "ovsdb-models/sbdb/a.go", "ovsdb-models/sbdb/b.go"}
	if !slices.Equal(got, want) {
		t.Errorf("expand = %v, want %v", got, want)
	}
	for heading, want := range map[string]string{
		"The logical topology in NB":    "the-logical-topology-in-nb",
		"ovnt-master":                   "ovnt-master",
		"CNI protocol (`internal/cni`)": "cni-protocol-internalcni",
		"Tests: three tiers":            "tests-three-tiers",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}
