//go:build linux

package nb_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// newerNBSchema writes the pinned NB schema with what a newer OVN adds to it: a column the
// model lacks in a table the master monitors (Logical_Router_Port.status, which northd of
// OVN 24.03 and later fills) and a table the model lacks.
func newerNBSchema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(ovsdbtest.NB.Path())
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	s["version"] = "7.99.0"
	tables := s["tables"].(map[string]any)
	lrp := tables[nbdb.LogicalRouterPortTable].(map[string]any)["columns"].(map[string]any)
	lrp["status"] = map[string]any{"type": map[string]any{"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
	tables["Newer_Table"] = map[string]any{"columns": map[string]any{"name": map[string]any{"type": "string"}}, "isRoot": true}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ovn-nb-newer.ovsschema")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConnectToNewerNB: the master's client keeps its cache in step with an NB whose rows
// carry columns the model does not know, instead of failing every update of such a row.
func TestConnectToNewerNB(t *testing.T) {
	srv := ovsdbtest.StartFile(t, newerNBSchema(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := nb.Connect(ctx, ovsdb.Config{Remotes: srv.Remote})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	transact := func(ops ...map[string]any) {
		t.Helper()
		b, _ := json.Marshal(append([]any{"OVN_Northbound"}, anySlice(ops)...))
		out, err := exec.Command("ovsdb-client", "transact", srv.Remote, string(b)).CombinedOutput()
		if err != nil || strings.Contains(string(out), `"error"`) {
			t.Fatalf("ovsdb-client transact: %v: %s", err, out)
		}
	}
	// What a newer northd does: a router port with a status the model has no field for.
	transact(
		map[string]any{"op": "insert", "table": "Logical_Router_Port", "uuid-name": "p",
			"row": map[string]any{"name": "rtoj-r1", "mac": "0a:58:0a:00:00:01", "networks": "10.0.0.1/24",
				"status": []any{"map", []any{[]any{"hosting-chassis", "node1"}}}}},
		map[string]any{"op": "insert", "table": "Logical_Router", "row": map[string]any{"name": "r1",
			"ports": []any{"set", []any{[]any{"named-uuid", "p"}}}}},
		map[string]any{"op": "insert", "table": "Newer_Table", "row": map[string]any{"name": "x"}},
	)
	waitMAC := func(want string) {
		t.Helper()
		for {
			var ports []nbdb.LogicalRouterPort
			if err := c.List(ctx, &ports); err != nil {
				t.Fatal(err)
			}
			if len(ports) == 1 && ports[0].Name == "rtoj-r1" && ports[0].MAC == want {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the master's cache never had rtoj-r1 with MAC %s: %+v", want, ports)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitMAC("0a:58:0a:00:00:01")
	transact(map[string]any{"op": "update", "table": "Logical_Router_Port",
		"where": []any{[]any{"name", "==", "rtoj-r1"}},
		"row":   map[string]any{"mac": "0a:58:0a:00:00:02", "status": []any{"map", []any{[]any{"hosting-chassis", "node2"}}}}})
	waitMAC("0a:58:0a:00:00:02")
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
