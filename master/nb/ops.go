package nb

import (
	"fmt"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// Ops returns p's operations for one transaction, built with api (a libovsdb client):
// inserts, updates, reference insertions, reference removals, deletions. Every operation
// names its row by UUID, so none depends on names being unique.
func (p *Plan) Ops(api client.API) ([]ovsdb.Operation, error) {
	var ops []ovsdb.Operation
	if len(p.Create) > 0 {
		o, err := api.Create(p.Create...)
		if err != nil {
			return nil, fmt.Errorf("nb: inserts: %w", err)
		}
		ops = append(ops, o...)
	}
	for _, u := range p.Update {
		a, err := access(u.Row)
		if err != nil {
			return nil, err
		}
		o, err := api.Where(byUUID(a.table, *a.uuid)).Update(u.Row, u.Fields...)
		if err != nil {
			return nil, fmt.Errorf("nb: update %s %q: %w", a.table, a.name, err)
		}
		ops = append(ops, o...)
	}
	for _, l := range []struct {
		links   []Link
		mutator ovsdb.Mutator
	}{{p.Link, ovsdb.MutateOperationInsert}, {p.Unlink, ovsdb.MutateOperationDelete}} {
		o, err := mutations(api, l.links, l.mutator)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	for _, m := range p.Delete {
		a, err := access(m)
		if err != nil {
			return nil, err
		}
		o, err := api.Where(byUUID(a.table, *a.uuid)).Delete()
		if err != nil {
			return nil, fmt.Errorf("nb: delete %s %q: %w", a.table, a.name, err)
		}
		ops = append(ops, o...)
	}
	return ops, nil
}

// byUUID is a model of table that selects the row uuid.
func byUUID(table, uuid string) model.Model {
	m := NewModel(table)
	a, _ := access(m)
	*a.uuid = uuid
	return m
}

// mutations turns links into one mutation per parent row and reference column.
func mutations(api client.API, links []Link, mutator ovsdb.Mutator) ([]ovsdb.Operation, error) {
	type target struct{ table, uuid, childTable string }
	var order []target
	children := map[target][]string{}
	for _, l := range links {
		t := target{l.ParentTable, l.ParentUUID, l.ChildTable}
		if _, seen := children[t]; !seen {
			order = append(order, t)
		}
		children[t] = append(children[t], l.Child)
	}
	var ops []ovsdb.Operation
	for _, t := range order {
		parent := byUUID(t.table, t.uuid)
		ref, err := refColumn(parent, t.childTable)
		if err != nil {
			return nil, err
		}
		o, err := api.Where(parent).Mutate(parent, model.Mutation{Field: ref, Mutator: mutator, Value: children[t]})
		if err != nil {
			return nil, fmt.Errorf("nb: %s %s rows of %s %s: %w", mutator, t.childTable, t.table, t.uuid, err)
		}
		ops = append(ops, o...)
	}
	return ops, nil
}

// CheckApplied checks the results of a committed transaction of ops (from Ops): every update
// and every reference insertion must have found its row. A row can vanish between the diff
// and the commit (its owner deleted it meanwhile); OVSDB then applies the operation to no
// row without error, and a child inserted under a vanished parent is garbage-collected at
// once. The caller syncs again.
func CheckApplied(ops []ovsdb.Operation, results []ovsdb.OperationResult) error {
	for i, op := range ops {
		if i >= len(results) {
			break
		}
		inserts := op.Op == ovsdb.OperationMutate && len(op.Mutations) > 0 && op.Mutations[0].Mutator == ovsdb.MutateOperationInsert
		if (op.Op == ovsdb.OperationUpdate || inserts) && results[i].Count == 0 {
			return fmt.Errorf("nb: operation %d (%s %s) found no row: it was deleted meanwhile", i, op.Op, op.Table)
		}
	}
	return nil
}
