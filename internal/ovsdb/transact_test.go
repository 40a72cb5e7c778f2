package ovsdb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
)

func TestTransactEmptyIsNoOp(t *testing.T) {
	// A nil client proves there is no round trip: any use of it would panic.
	results, err := Transact(context.Background(), nil)
	if results != nil || err != nil {
		t.Errorf("Transact() = %v, %v; want nil, nil", results, err)
	}
}

func TestCheckResults(t *testing.T) {
	ops := []libovsdb.Operation{
		{Op: libovsdb.OperationInsert, Table: "Address_Set", Row: libovsdb.Row{"name": "as1"}},
		{
			Op: libovsdb.OperationMutate, Table: "Logical_Switch",
			Where:     []libovsdb.Condition{libovsdb.NewCondition("_uuid", libovsdb.ConditionEqual, libovsdb.UUID{GoUUID: "6f090d0f-596c-4a50-a62c-f637e508089f"})},
			Mutations: []libovsdb.Mutation{*libovsdb.NewMutation("ports", libovsdb.MutateOperationInsert, libovsdb.UUID{GoUUID: "lsp1"})},
		},
	}
	tests := []struct {
		name      string
		results   []libovsdb.OperationResult
		wantIndex int      // -2: no *OpError
		wantMsg   []string // substrings of the error; none: no error
	}{
		{name: "success", results: []libovsdb.OperationResult{{UUID: libovsdb.UUID{GoUUID: "x"}}, {Count: 1}}},
		{
			name:      "second operation rejected",
			results:   []libovsdb.OperationResult{{}, {Error: "constraint violation", Details: "bad"}},
			wantIndex: 1,
			wantMsg: []string{
				"operation 1 of 2",
				"mutate Logical_Switch where _uuid == 6f090d0f-596c-4a50-a62c-f637e508089f (ports insert)",
				"constraint violation: bad",
			},
		},
		{
			name:      "first operation rejected, the rest not run",
			results:   []libovsdb.OperationResult{{Error: "timed out"}, {}},
			wantIndex: 0,
			wantMsg:   []string{"operation 0 of 2 (insert Address_Set name=\"as1\") failed: timed out"},
		},
		{
			name:      "commit failed: one result more than operations",
			results:   []libovsdb.OperationResult{{}, {Count: 1}, {Error: "referential integrity violation", Details: "row lsp1 missing"}},
			wantIndex: CommitFailed,
			wantMsg: []string{
				"commit of 2 operations failed",
				"insert Address_Set name=\"as1\"; mutate Logical_Switch",
				"referential integrity violation: row lsp1 missing",
			},
		},
		{
			name:      "fewer results than operations",
			results:   []libovsdb.OperationResult{{}},
			wantIndex: -2,
			wantMsg:   []string{"1 results for 2 operations"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkResults(ops, tt.results, nil)
			if len(tt.wantMsg) == 0 {
				if err != nil {
					t.Fatalf("checkResults: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkResults: no error")
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			var opErr *OpError
			if isOpErr := errors.As(err, &opErr); isOpErr != (tt.wantIndex != -2) {
				t.Fatalf("error %T, want *OpError: %v", err, tt.wantIndex != -2)
			}
			if opErr != nil && opErr.Index != tt.wantIndex {
				t.Errorf("Index = %d, want %d", opErr.Index, tt.wantIndex)
			}
		})
	}
}

func TestDescribeOp(t *testing.T) {
	names := func(table, uuid string) string {
		if table == "Logical_Switch" && uuid == "6f090d0f-596c-4a50-a62c-f637e508089f" {
			return "node1"
		}
		return ""
	}
	ids := libovsdb.OvsMap{GoMap: map[interface{}]interface{}{"k8s.ovn.org/owner": "ns/pod", "a": "b"}}
	tests := []struct {
		op   libovsdb.Operation
		want string
	}{
		{
			op:   libovsdb.Operation{Op: "insert", Table: "Logical_Switch", UUIDName: "u1", Row: libovsdb.Row{"name": "node1", "external_ids": ids}},
			want: `insert Logical_Switch uuid-name=u1 name="node1"`,
		},
		{
			op:   libovsdb.Operation{Op: "insert", Table: "ACL", Row: libovsdb.Row{"priority": 1000, "external_ids": ids}},
			want: `insert ACL external_ids={"a"="b", "k8s.ovn.org/owner"="ns/pod"}`,
		},
		{
			op: libovsdb.Operation{
				Op: "update", Table: "Logical_Switch_Port",
				Where: []libovsdb.Condition{libovsdb.NewCondition("name", libovsdb.ConditionEqual, "p1")},
				Row:   libovsdb.Row{"tag_request": 5000, "addresses": libovsdb.OvsSet{GoSet: []interface{}{"dynamic"}}},
			},
			want: `update Logical_Switch_Port where name == "p1" (set addresses, tag_request)`,
		},
		{
			op: libovsdb.Operation{
				Op: "wait", Table: "Logical_Switch", Until: "==",
				Where: []libovsdb.Condition{libovsdb.NewCondition("name", libovsdb.ConditionEqual, "sw"), libovsdb.NewCondition("external_ids", libovsdb.ConditionIncludes, ids)},
			},
			want: `wait Logical_Switch where name == "sw" and external_ids includes {"a"="b", "k8s.ovn.org/owner"="ns/pod"} until ==`,
		},
		{
			op: libovsdb.Operation{
				Op: "mutate", Table: "Logical_Switch",
				Where:     []libovsdb.Condition{libovsdb.NewCondition("_uuid", libovsdb.ConditionEqual, libovsdb.UUID{GoUUID: "6f090d0f-596c-4a50-a62c-f637e508089f"})},
				Mutations: []libovsdb.Mutation{*libovsdb.NewMutation("ports", libovsdb.MutateOperationInsert, libovsdb.UUID{GoUUID: "lsp1"})},
			},
			want: `mutate Logical_Switch where _uuid == 6f090d0f-596c-4a50-a62c-f637e508089f ("node1") (ports insert)`,
		},
		{
			op:   libovsdb.Operation{Op: "delete", Table: "Address_Set", Where: []libovsdb.Condition{libovsdb.NewCondition("name", libovsdb.ConditionEqual, strings.Repeat("x", 100))}},
			want: `delete Address_Set where name == "` + strings.Repeat("x", 79) + `...`,
		},
	}
	for _, tt := range tests {
		if got := describeOp(tt.op, names); got != tt.want {
			t.Errorf("describeOp:\n got %s\nwant %s", got, tt.want)
		}
	}
}

// TestTransactErrorsNameTheRow makes a real ovsdb-server reject transactions in the ways
// OVSDB can (a rejected operation, a failed commit) and checks what the error says.
func TestTransactErrorsNameTheRow(t *testing.T) {
	srv := ovsdbtest.Start(t, ovsdbtest.NB)
	nbctl := func(args ...string) string {
		t.Helper()
		return srv.Exec(t, "ovn-nbctl", args...)
	}
	nbctl("ls-add", "sw", "--", "lsp-add", "sw", "p1")
	portUUID := nbctl("--bare", "--columns=_uuid", "find", "Logical_Switch_Port", "name=p1")
	c := newClient(t, srv.Remote, Config{Tables: allTables()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	create := func(models ...model.Model) []libovsdb.Operation {
		t.Helper()
		ops, err := c.Create(models...)
		if err != nil {
			t.Fatal(err)
		}
		return ops
	}
	tag := 5000
	p1 := &testLSP{Name: "p1", TagRequest: &tag}
	badTag, err := c.Where(p1).Update(p1, &p1.TagRequest)
	if err != nil {
		t.Fatal(err)
	}
	missingPort := "0b9e7b2a-5b4e-4a4b-9d49-2d2f2c1d0e11"

	tests := []struct {
		name      string
		ops       []libovsdb.Operation
		wantIndex int
		wantMsg   []string
	}{
		{
			name:      "two rows with the same indexed name",
			ops:       create(&testAddressSet{Name: "dup"}, &testAddressSet{Name: "dup"}),
			wantIndex: CommitFailed,
			wantMsg: []string{
				`commit of 2 operations failed (insert Address_Set name="dup"; insert Address_Set name="dup")`,
				"constraint violation", `identical values (dup) for index on column "name"`,
			},
		},
		{
			name: "wait for a row that does not exist",
			ops: []libovsdb.Operation{{
				Op: libovsdb.OperationWait, Table: "Logical_Switch", Timeout: new(int), Until: "==",
				Where: []libovsdb.Condition{libovsdb.NewCondition("name", libovsdb.ConditionEqual, "absent")},
				Rows:  []libovsdb.Row{{"name": "absent"}},
			}},
			wantIndex: 0,
			wantMsg:   []string{`operation 0 of 1 (wait Logical_Switch where name == "absent" until ==) failed: timed out`},
		},
		{
			name:      "value out of the column's range",
			ops:       append(create(&testLS{Name: "not-created"}), badTag...),
			wantIndex: 1,
			wantMsg: []string{
				"operation 1 of 2 (update Logical_Switch_Port where _uuid == " + portUUID + ` ("p1") (set tag_request)) failed`,
				"constraint violation: 5000 is not in the valid range 0 to 4095",
			},
		},
		{
			name:      "reference to a row that does not exist",
			ops:       create(&testLS{Name: "dangling", UUID: "newls"}),
			wantIndex: CommitFailed,
			wantMsg:   []string{`insert Logical_Switch uuid-name=newls name="dangling"`, "referential integrity violation", missingPort},
		},
	}
	// Give the last insert a port that does not exist.
	tests[3].ops[0].Row["ports"] = libovsdb.OvsSet{GoSet: []interface{}{libovsdb.UUID{GoUUID: missingPort}}}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results, err := Transact(ctx, c, tt.ops...)
			if err == nil {
				t.Fatalf("Transact succeeded: %v", results)
			}
			t.Log(err)
			var opErr *OpError
			if !errors.As(err, &opErr) {
				t.Fatalf("error %T %v, want *OpError", err, err)
			}
			if opErr.Index != tt.wantIndex {
				t.Errorf("Index = %d, want %d", opErr.Index, tt.wantIndex)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error\n%s\ndoes not contain\n%s", err, s)
				}
			}
		})
	}

	// Nothing of the rejected transactions was applied.
	if out := nbctl("--bare", "--columns=name", "list", "Address_Set"); out != "" {
		t.Errorf("address sets on the server: %q, want none", out)
	}
	if out := nbctl("--bare", "--columns=name", "list", "Logical_Switch"); strings.TrimSpace(out) != "sw" {
		t.Errorf("switches on the server: %q, want only sw", out)
	}

	// An operation naming a column the schema does not have is refused before sending.
	_, err = Transact(ctx, c, libovsdb.Operation{Op: "insert", Table: "Logical_Switch", Row: libovsdb.Row{"name": "x", "no_such_column": "y"}})
	if err == nil || !strings.Contains(err.Error(), `operation 0 of 1 (insert Logical_Switch name="x"): table or column not in the OVN_Northbound schema`) {
		t.Errorf("unknown column: err = %v", err)
	}

	// OVSDB does not treat a mutate (or update, delete) that matches no row as an error.
	gone := &testLS{UUID: missingPort}
	mutate, err := c.Where(gone).Mutate(gone, model.Mutation{
		Field: &gone.ExternalIDs, Mutator: libovsdb.MutateOperationInsert, Value: map[string]string{"a": "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	results, err := Transact(ctx, c, mutate...)
	if err != nil || len(results) != 1 || results[0].Count != 0 {
		t.Errorf("mutate of a missing row = %+v, %v; want one result with Count 0 and no error", results, err)
	}
}
