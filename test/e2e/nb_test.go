//go:build linux

package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// nbRow is one Northbound row the master owns, as ovn-nbctl lists it.
type nbRow struct {
	table, name, kind, owner, role string
}

func (r nbRow) String() string {
	return fmt.Sprintf("%s %q (%s %s, %s)", r.table, r.name, r.kind, r.owner, r.role)
}

var nbTables = []string{"Logical_Router", "Logical_Switch", "Logical_Router_Port", "Logical_Switch_Port",
	"Logical_Router_Static_Route", "NAT"}

// ownedRows lists every row of the master's tables that carries an owner kind, through
// ovn-nbctl as an operator would.
func ownedRows(t *testing.T) []nbRow {
	t.Helper()
	ctx := context.Background()
	var rows []nbRow
	for _, table := range nbTables {
		cols := "name,external_ids"
		if table == "Logical_Router_Static_Route" || table == "NAT" {
			cols = "_uuid,external_ids"
		}
		out, err := cl.Central.NBCtl(ctx, "--format=csv", "--data=bare", "--no-headings", "--columns="+cols, "list", table)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		for _, rec := range recs {
			ids := map[string]string{}
			for _, kv := range strings.Fields(rec[1]) {
				k, v, _ := strings.Cut(kv, "=")
				ids[k] = v
			}
			if ids[nb.KindKey] == "" {
				continue
			}
			rows = append(rows, nbRow{table, rec[0], ids[nb.KindKey], ids[nb.NameKey], ids[nb.RoleKey]})
		}
	}
	return rows
}

// checkNBConsistent fails the test when two owned rows play the same role for the same owner
// (a duplicate), or a row's owner no longer exists (a stale row). Pods of earlier tests are
// still being deleted in the background, so it waits (bounded) for the master to converge
// and reports what is still wrong then.
func checkNBConsistent(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var problems []string
	poll.Until(ctx, "a consistent NB", 200*time.Millisecond, func() (bool, error) {
		problems = nbProblems(t, ctx)
		return len(problems) == 0, nil
	})
	for _, p := range problems {
		t.Error(p)
	}
}

func nbProblems(t *testing.T, ctx context.Context) []string {
	var problems []string
	seen := map[string]nbRow{}
	nodes := map[string]bool{}
	nl, err := client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	for _, n := range nl.Items {
		nodes[n.Name] = true
	}
	for _, r := range ownedRows(t) {
		key := r.table + "|" + r.kind + "|" + r.owner + "|" + r.role
		if prev, dup := seen[key]; dup {
			problems = append(problems, fmt.Sprintf("duplicate rows: %s and %s", prev, r))
		}
		seen[key] = r
		switch nb.Kind(r.kind) {
		case nb.Node:
			if !nodes[r.owner] {
				problems = append(problems, fmt.Sprintf("stale row of deleted node: %s", r))
			}
		case nb.Pod:
			ns, name, _ := strings.Cut(r.owner, "/")
			if _, err := client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				problems = append(problems, fmt.Sprintf("stale row of pod %s: %s (%v)", r.owner, r, err))
			}
		}
	}
	return problems
}

// rowsOwnedBy returns the owned rows of one owner.
func rowsOwnedBy(t *testing.T, kind nb.Kind, name string) []nbRow {
	var out []nbRow
	for _, r := range ownedRows(t) {
		if r.kind == string(kind) && r.owner == name {
			out = append(out, r)
		}
	}
	return out
}

// rowSet is the set of owned rows as "table|kind|owner|role|name", leaving out the rows of
// pods outside namespace ns: earlier tests' namespaces are still being emptied by the
// namespace controller, so their pods' rows go away at any time.
func rowSet(t *testing.T, ns string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, r := range ownedRows(t) {
		if nb.Kind(r.kind) == nb.Pod && !strings.HasPrefix(r.owner, ns+"/") {
			continue
		}
		set[r.table+"|"+r.kind+"|"+r.owner+"|"+r.role+"|"+r.name] = true
	}
	return set
}

// compareRowSets reports every row missing from got and every extra one.
func compareRowSets(t *testing.T, when string, want, got map[string]bool) {
	t.Helper()
	for k := range want {
		if !got[k] {
			t.Errorf("%s: row missing: %s", when, k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("%s: unexpected row: %s", when, k)
		}
	}
}
