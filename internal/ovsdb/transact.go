package ovsdb

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
)

// CommitFailed is OpError.Index when every operation succeeded but the server could not
// commit the transaction (an index made two rows equal, a reference points to no row, a
// table has more rows than its maxRows...).
const CommitFailed = -1

// OpError is the error Transact returns when the server rejected a transaction. Nothing of
// the transaction was applied.
type OpError struct {
	// Index is the position of the rejected operation in the transaction, or CommitFailed.
	Index int
	// Ops are all operations of the transaction; Ops[Index] is the rejected one.
	Ops []libovsdb.Operation
	// Err and Details are the server's error ("constraint violation", "timed out", ...)
	// and its explanation, which for a commit failure names the rows involved.
	Err     string
	Details string

	// what describes the rejected operation, or the transaction, for Error.
	what string
}

func (e *OpError) Error() string {
	var b strings.Builder
	if e.Index == CommitFailed {
		n := fmt.Sprintf("%d operations", len(e.Ops))
		if len(e.Ops) == 1 {
			n = "1 operation"
		}
		fmt.Fprintf(&b, "ovsdb: commit of %s failed (%s)", n, e.what)
	} else {
		fmt.Fprintf(&b, "ovsdb: operation %d of %d (%s) failed", e.Index, len(e.Ops), e.what)
	}
	b.WriteString(": ")
	b.WriteString(e.Err)
	if e.Details != "" {
		b.WriteString(": ")
		b.WriteString(e.Details)
	}
	return b.String()
}

// Transact sends ops to c's server as one transaction and checks every result.
//
// It returns the results, one per operation, when the transaction committed. When the server
// rejected it, the error is an *OpError naming the rejected operation (index, op, table and
// the row it concerns) or the failed commit, with the server's error and details. With no
// ops Transact does nothing and returns nil, nil.
//
// As in OVSDB itself, an update, mutate or delete that matches no row succeeds with Count 0;
// a caller that needs the row to exist adds a "wait" operation for it.
//
// While c is reconnecting, Transact waits for the new connection until ctx is done. If the
// connection drops while the transaction is in flight, the error wraps
// client.ErrNotConnected and the transaction may or may not have been committed.
func Transact(ctx context.Context, c client.Client, ops ...libovsdb.Operation) ([]libovsdb.OperationResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	names := cachedNames(c)
	// libovsdb rejects a transaction naming an unknown table or column with the bare
	// "validation failed for the operation"; check each operation to say which one.
	if schema := c.Schema(); len(schema.Tables) > 0 {
		for i := range ops {
			if !schema.ValidateOperations(ops[i]) {
				return nil, fmt.Errorf("ovsdb: operation %d of %d (%s): table or column not in the %s schema",
					i, len(ops), describeOp(ops[i], names), schema.Name)
			}
		}
	}
	results, err := c.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: transaction of %d operations (%s): %w", len(ops), describeOps(ops, names), err)
	}
	if err := checkResults(ops, results, names); err != nil {
		return nil, err
	}
	return results, nil
}

// checkResults turns the first error among results into an *OpError. OVSDB answers with one
// result per operation; the operations after a rejected one have empty results. When all
// operations succeeded but the commit failed, there is one more result, carrying the error.
func checkResults(ops []libovsdb.Operation, results []libovsdb.OperationResult, names nameFunc) error {
	if len(results) < len(ops) {
		return fmt.Errorf("ovsdb: %d results for %d operations (%s)", len(results), len(ops), describeOps(ops, names))
	}
	for i, r := range results {
		if r.Error == "" {
			continue
		}
		if i >= len(ops) {
			return &OpError{Index: CommitFailed, Ops: ops, Err: r.Error, Details: r.Details, what: describeOps(ops, names)}
		}
		return &OpError{Index: i, Ops: ops, Err: r.Error, Details: r.Details, what: describeOp(ops[i], names)}
	}
	return nil
}

// nameFunc returns the name of the row of table with the given UUID, or "" if unknown.
type nameFunc func(table, uuid string) string

// cachedNames looks rows up in c's cache, so that an error can say `_uuid == 6f09... (p1)`:
// libovsdb's Where turns a model's name into its UUID when the row is cached.
func cachedNames(c client.Client) nameFunc {
	return func(table, uuid string) string {
		tc := c.Cache()
		if tc == nil {
			return ""
		}
		rows := tc.Table(table)
		if rows == nil {
			return ""
		}
		return modelName(rows.Row(uuid))
	}
}

// modelName is the value of the field tagged `ovsdb:"name"` of a model, or "".
func modelName(m model.Model) string {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	v = v.Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).Tag.Get("ovsdb") == "name" && v.Field(i).Kind() == reflect.String {
			return v.Field(i).String()
		}
	}
	return ""
}

const (
	maxDescribedOps = 4
	maxValueLen     = 80
)

// describeOps summarises a transaction for an error message.
func describeOps(ops []libovsdb.Operation, names nameFunc) string {
	parts := make([]string, 0, maxDescribedOps+1)
	for i, op := range ops {
		if i == maxDescribedOps {
			parts = append(parts, fmt.Sprintf("and %d more", len(ops)-i))
			break
		}
		parts = append(parts, describeOp(op, names))
	}
	return strings.Join(parts, "; ")
}

// describeOp names an operation and the row it concerns, for example
// `insert Logical_Switch name="node1"` or
// `mutate Logical_Switch where _uuid == 6f09... ("node1") (ports insert)`.
// names, if not nil, finds the name of a row given by its UUID.
func describeOp(op libovsdb.Operation, names nameFunc) string {
	var b strings.Builder
	b.WriteString(op.Op)
	if op.Table != "" {
		b.WriteString(" ")
		b.WriteString(op.Table)
	}
	if op.UUID != "" {
		b.WriteString(" uuid=" + op.UUID)
	}
	if op.UUIDName != "" {
		b.WriteString(" uuid-name=" + op.UUIDName)
	}
	if len(op.Where) > 0 {
		conds := make([]string, 0, len(op.Where))
		for _, c := range op.Where {
			cond := fmt.Sprintf("%s %s %s", c.Column, c.Function, formatValue(c.Value))
			if uuid, ok := c.Value.(libovsdb.UUID); ok && c.Column == "_uuid" && names != nil {
				if name := names(op.Table, uuid.GoUUID); name != "" {
					cond += " (" + formatValue(name) + ")"
				}
			}
			conds = append(conds, cond)
		}
		b.WriteString(" where " + strings.Join(conds, " and "))
	}
	if op.Op == libovsdb.OperationWait && op.Until != "" {
		b.WriteString(" until " + op.Until)
	}
	if id := rowIdentity(op.Row); id != "" {
		b.WriteString(" " + id)
	}
	if op.Op == libovsdb.OperationUpdate && len(op.Row) > 0 {
		b.WriteString(" (set " + strings.Join(sortedColumns(op.Row), ", ") + ")")
	}
	if len(op.Mutations) > 0 {
		muts := make([]string, 0, len(op.Mutations))
		for _, m := range op.Mutations {
			muts = append(muts, fmt.Sprintf("%s %s", m.Column, m.Mutator))
		}
		b.WriteString(" (" + strings.Join(muts, ", ") + ")")
	}
	return b.String()
}

// rowIdentity picks the columns that tell a person which row an operation writes: its name,
// else its external_ids (where ovn-transparent records the owner), else nothing.
func rowIdentity(row libovsdb.Row) string {
	if name, ok := row["name"]; ok {
		return "name=" + formatValue(name)
	}
	if ids, ok := row["external_ids"].(libovsdb.OvsMap); ok && len(ids.GoMap) > 0 {
		return "external_ids=" + formatValue(ids)
	}
	return ""
}

func sortedColumns(row libovsdb.Row) []string {
	cols := make([]string, 0, len(row))
	for c := range row {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return cols
}

// formatValue prints an OVSDB value the way ovn-nbctl does, shortened.
func formatValue(v interface{}) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case libovsdb.UUID:
		s = x.GoUUID
	case libovsdb.OvsSet:
		elems := make([]string, 0, len(x.GoSet))
		for _, e := range x.GoSet {
			elems = append(elems, formatValue(e))
		}
		s = "[" + strings.Join(elems, ", ") + "]"
	case libovsdb.OvsMap:
		pairs := make([]string, 0, len(x.GoMap))
		for k, v := range x.GoMap {
			pairs = append(pairs, formatValue(k)+"="+formatValue(v))
		}
		sort.Strings(pairs)
		s = "{" + strings.Join(pairs, ", ") + "}"
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > maxValueLen {
		s = s[:maxValueLen] + "..."
	}
	return s
}
