package upstream

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// NotApplicableFile is the list of upstream tests that cannot apply to this cluster.
//
//go:embed not-applicable.txt
var NotApplicableFile []byte

// Exclusion is one entry of the list: an upstream test name (Test, matched as a literal
// substring of the full spec name) or a pattern naming a whole class of tests (Match, a
// regular expression), and why it cannot apply here.
type Exclusion struct {
	Test  string
	Match *regexp.Regexp
	Why   string
	Line  int
	// BelowNodes, when set, limits the entry to clusters of fewer nodes: the tests need
	// that many and cannot apply to a smaller cluster, but run on one that big.
	BelowNodes int
}

// Matches reports whether the upstream spec name is excluded by e.
func (e Exclusion) Matches(name string) bool {
	if e.Match != nil {
		return e.Match.MatchString(name)
	}
	return strings.Contains(name, e.Test)
}

// String is the entry as the list states it.
func (e Exclusion) String() string {
	if e.Match != nil {
		return "match: " + e.Match.String()
	}
	return "test: " + e.Test
}

// ParseList reads the list format: entries separated by blank lines, each a "test: NAME" or
// "match: REGEXP" line followed by a "why: REASON" line (a reason may continue on further
// lines) and optionally a "below-nodes: N" line (the entry holds only for clusters of
// fewer than N nodes); lines starting with # are comments. An entry without a reason is an error: the
// list is where a skip is justified, never a place to hide a failure.
func ParseList(data []byte) ([]Exclusion, error) {
	var out []Exclusion
	var cur *Exclusion
	flush := func() error {
		if cur == nil {
			return nil
		}
		if strings.TrimSpace(cur.Why) == "" {
			return fmt.Errorf("line %d: %s has no \"why:\" line", cur.Line, cur)
		}
		cur.Why = strings.TrimSpace(cur.Why)
		out = append(out, *cur)
		cur = nil
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
		case line == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "test:"), strings.HasPrefix(line, "match:"):
			if err := flush(); err != nil {
				return nil, err
			}
			key, val, _ := strings.Cut(line, ":")
			val = strings.TrimSpace(val)
			if val == "" {
				return nil, fmt.Errorf("line %d: empty %s", n, key)
			}
			cur = &Exclusion{Line: n}
			if key == "test" {
				cur.Test = val
			} else {
				re, err := regexp.Compile(val)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n, err)
				}
				cur.Match = re
			}
		case strings.HasPrefix(line, "below-nodes:"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: \"below-nodes:\" without a test or match line before it", n)
			}
			v, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "below-nodes:")))
			if err != nil || v < 2 {
				return nil, fmt.Errorf("line %d: below-nodes wants a node count of at least 2", n)
			}
			cur.BelowNodes = v
		case strings.HasPrefix(line, "why:"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: \"why:\" without a test or match line before it", n)
			}
			cur.Why += strings.TrimSpace(strings.TrimPrefix(line, "why:"))
		default:
			if cur == nil || cur.Why == "" {
				return nil, fmt.Errorf("line %d: %q is neither test:, match:, why: nor a reason's continuation", n, line)
			}
			cur.Why += " " + line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// SkipRegexp is the ginkgo --skip expression that leaves out every entry of the list;
// empty for an empty list.
func SkipRegexp(list []Exclusion) string {
	var alts []string
	for _, e := range list {
		if e.Match != nil {
			alts = append(alts, "(?:"+e.Match.String()+")")
		} else {
			alts = append(alts, regexp.QuoteMeta(e.Test))
		}
	}
	return strings.Join(alts, "|")
}

// Excluded returns the first entry of the list that excludes the spec name, or nil.
func Excluded(list []Exclusion, name string) *Exclusion {
	for i := range list {
		if list[i].Matches(name) {
			return &list[i]
		}
	}
	return nil
}

// ForCluster is the part of the list that holds for a cluster of the given number of nodes:
// every entry but those limited to smaller clusters (BelowNodes).
func ForCluster(list []Exclusion, nodes int) []Exclusion {
	var out []Exclusion
	for _, e := range list {
		if e.BelowNodes == 0 || nodes < e.BelowNodes {
			out = append(out, e)
		}
	}
	return out
}
