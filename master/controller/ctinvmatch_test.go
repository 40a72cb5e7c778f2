package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// count is how many collected lines hold s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestUnitWarnsWhenInvalidDropTurnedOff: setting NB_Global options:use_ct_inv_match=false
// (which removes OVN's drop of packets conntrack marks invalid, docs/security.md) is logged
// once, not again on NB_Global's frequent other updates, and again by a master that starts
// with it set.
func TestUnitWarnsWhenInvalidDropTurnedOff(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"))
	// Restart once the first master has started (it writes the cluster router), with its
	// log collected.
	var routers []nbdb.LogicalRouter
	for deadline := time.Now().Add(10 * time.Second); len(routers) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := e.reader.List(e.ctx, &routers); err != nil {
			t.Fatal(err)
		}
	}
	e.logs = &logLines{}
	e.restartMaster()
	const warning = "options:use_ct_inv_match=false"
	set := func(options map[string]string, nbCfg int) {
		t.Helper()
		var globals []nbdb.NBGlobal
		if err := e.reader.List(e.ctx, &globals); err != nil || len(globals) != 1 {
			t.Fatalf("NB_Global: %v, %d rows", err, len(globals))
		}
		g := globals[0]
		g.Options, g.NbCfg = options, nbCfg
		ops, err := e.reader.Where(&g).Update(&g, &g.Options, &g.NbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ovsdb.Transact(e.ctx, e.reader, ops...); err != nil {
			t.Fatal(err)
		}
	}
	waitCount := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for e.logs.count(warning) < want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		// Give a wrong extra line the same moment to show.
		time.Sleep(200 * time.Millisecond)
		if got := e.logs.count(warning); got != want {
			t.Fatalf("%d warnings, want %d; log:\n%s", got, want, strings.Join(e.logs.lines, "\n"))
		}
	}
	set(map[string]string{"use_ct_inv_match": "true"}, 1)
	waitCount(0)
	set(map[string]string{"use_ct_inv_match": "false"}, 2)
	waitCount(1)
	set(map[string]string{"use_ct_inv_match": "false"}, 3) // northd bumping nb_cfg
	waitCount(1)
	e.restartMaster()
	waitCount(2)
}
