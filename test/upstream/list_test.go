package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNotApplicableList: the shipped list parses and every entry states a reason.
func TestNotApplicableList(t *testing.T) {
	list, err := ParseList(NotApplicableFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("the list is empty")
	}
	for _, e := range list {
		if len(e.Why) < 20 {
			t.Errorf("line %d: %s: reason %q says too little", e.Line, e, e.Why)
		}
	}
}

func TestParseList(t *testing.T) {
	list, err := ParseList([]byte(`# comment
test: [sig-network] Services should do a (thing) [Conformance]
why: first line
  second line

match: \[Disruptive\]
why: breaks nodes

match: six nodes
why: needs six
below-nodes: 6
`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ForCluster(list, 3)); n != 3 {
		t.Errorf("a 3-node cluster has %d entries, want 3", n)
	}
	if got := ForCluster(list, 6); len(got) != 2 || got[1].Line != 6 {
		t.Errorf("a 6-node cluster keeps %+v, want the first two entries", got)
	}
	if len(list) != 3 || list[0].Why != "first line second line" || list[1].Match == nil {
		t.Fatalf("parsed %+v", list)
	}
	name := "[sig-network] Services should do a (thing) [Conformance]"
	if e := Excluded(list, name); e == nil || e.Line != 2 {
		t.Errorf("%q not excluded by the test: entry: %v", name, e)
	}
	if e := Excluded(list, "[sig-network] Services should do a thing [Conformance]"); e != nil {
		t.Errorf("a different name excluded by %v", e)
	}
	if e := Excluded(list, "[sig-node] reboot [Disruptive]"); e == nil || e.Line != 6 {
		t.Errorf("a [Disruptive] test not excluded by the match: entry: %v", e)
	}
	re := SkipRegexp(list)
	if !strings.Contains(re, `\(thing\)`) || !strings.Contains(re, `(?:\[Disruptive\])`) {
		t.Errorf("skip expression %q does not quote the name and keep the pattern", re)
	}
	for _, bad := range []string{"test: x\n", "why: y\n", "test: x\nwhy:\n", "match: [\nwhy: y\n", "stray\n",
		"below-nodes: 6\n", "test: x\nwhy: y\nbelow-nodes: six\n", "test: x\nwhy: y\nbelow-nodes: 1\n"} {
		if _, err := ParseList([]byte(bad)); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}

func TestReadJUnit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junit.xml")
	os.WriteFile(p, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1">
  <testsuite name="Kubernetes e2e suite" tests="3">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.5"></testcase>
    <testcase name="[It] [sig-network] B fails [Conformance]" classname="Kubernetes e2e suite" status="failed" time="30">
      <failure message="timed out" type="failed">details</failure>
    </testcase>
    <testcase name="[It] [sig-network] A skipped" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`), 0o644)
	rs, err := ReadJUnit(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(rs), rs)
	}
	if rs[1].Name != "[sig-network] A skipped" || rs[1].Status != Skipped {
		t.Errorf("skipped case: %+v", rs[1])
	}
	if rs[2].Name != "[sig-network] B fails [Conformance]" || rs[2].Status != Failed || rs[2].Message != "timed out" || rs[2].Time != 30*time.Second {
		t.Errorf("failed case: %+v", rs[2])
	}
}
