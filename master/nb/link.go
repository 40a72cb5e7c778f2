package nb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
)

// attach makes r's parent reference r, and only that parent.
func (p *Plan) attach(ctx context.Context, v View, scope Key, state map[ID]*planned, r Row, stale map[string]bool) error {
	child := state[r.ID]
	parent, err := resolveParent(ctx, v, scope, state, r)
	if err != nil {
		return err
	}
	if parent.created {
		// The new parent is inserted with its children already in its reference column.
		ref, err := refColumn(parent.model, child.table)
		if err != nil {
			return err
		}
		*ref = append(*ref, child.uuid)
	} else {
		ref, err := refColumn(parent.model, child.table)
		if err != nil {
			return err
		}
		if !child.created && slices.Contains(*ref, child.uuid) {
			return nil
		}
		pa, _ := access(parent.model)
		p.Link = append(p.Link, Link{ParentTable: parent.table, ParentUUID: parent.uuid, ParentName: pa.name,
			ChildTable: child.table, Child: child.uuid})
	}
	if child.created {
		return nil
	}
	// The existing child hangs elsewhere (a pod recreated on another node under the same
	// name, a port moved by hand): take it away from there, unless that row goes anyway.
	return p.unlinkElsewhere(ctx, v, child, map[string]bool{parent.uuid: true}, stale)
}

// unlinkElsewhere unlinks child, an existing row, from every row that references it, except
// the rows in keep and the stale rows (which go anyway).
func (p *Plan) unlinkElsewhere(ctx context.Context, v View, child *planned, keep, stale map[string]bool) error {
	others, err := v.Referrers(ctx, child.table, child.uuid)
	if err != nil {
		return err
	}
	for _, o := range others {
		a, err := access(o)
		if err != nil {
			return err
		}
		if keep[*a.uuid] || stale[*a.uuid] {
			continue
		}
		p.Unlink = append(p.Unlink, Link{ParentTable: a.table, ParentUUID: *a.uuid, ParentName: a.name,
			ChildTable: child.table, Child: child.uuid})
	}
	return nil
}

// reference makes exactly the rows r.ReferencedBy reference r, a root row.
func (p *Plan) reference(ctx context.Context, v View, scope Key, state map[ID]*planned, r Row, stale map[string]bool) error {
	child := state[r.ID]
	want := map[string]bool{}
	for _, id := range r.ReferencedBy {
		ref, err := resolveRow(ctx, v, scope, state, r.ID, id)
		if err != nil {
			return err
		}
		want[ref.uuid] = true
		col, err := refColumn(ref.model, child.table)
		if err != nil {
			return err
		}
		if ref.created {
			*col = append(*col, child.uuid)
			continue
		}
		if !child.created && slices.Contains(*col, child.uuid) {
			continue
		}
		ra, _ := access(ref.model)
		p.Link = append(p.Link, Link{ParentTable: ref.table, ParentUUID: ref.uuid, ParentName: ra.name,
			ChildTable: child.table, Child: child.uuid})
	}
	if child.created {
		return nil
	}
	return p.unlinkElsewhere(ctx, v, child, want, stale)
}

// resolveParent finds r's parent: among this sync's rows, or owned by another object.
func resolveParent(ctx context.Context, v View, scope Key, state map[ID]*planned, r Row) (*planned, error) {
	return resolveRow(ctx, v, scope, state, r.ID, r.Parent)
}

// resolveRow finds the row target that row needs (its parent, or a row that must reference
// it): among this sync's rows, or owned by another object.
func resolveRow(ctx context.Context, v View, scope Key, state map[ID]*planned, row, target ID) (*planned, error) {
	if target.Key == scope {
		if pl, ok := state[target]; ok {
			return pl, nil
		}
		return nil, fmt.Errorf("nb: %s: %s is not among the desired rows", row, target)
	}
	rows, err := v.Owned(ctx, target.Key)
	if err != nil {
		return nil, fmt.Errorf("nb: rows of %s: %w", target.Key, err)
	}
	var best model.Model
	var bestUUID string
	for _, m := range rows {
		a, err := access(m)
		if err != nil {
			return nil, err
		}
		id, _, err := FromExternalIDs(*a.ids)
		if err != nil || id != target || a.table != target.Table() {
			continue
		}
		// Several rows play one role only until their owner's next sync removes the
		// duplicates. Take the lowest UUID; if that one goes, OVSDB drops our row with it,
		// the cache reports the deletion, and our next sync attaches to the survivor.
		if best == nil || strings.Compare(*a.uuid, bestUUID) < 0 {
			best, bestUUID = m, *a.uuid
		}
	}
	if best == nil {
		return nil, &MissingParentError{Row: row, Parent: target}
	}
	return &planned{uuid: bestUUID, model: best, table: target.Table()}, nil
}

// remove plans the deletion of stale rows.
func (p *Plan) remove(ctx context.Context, v View, stale []model.Model, staleUUIDs map[string]bool) error {
	slices.SortFunc(stale, func(x, y model.Model) int {
		a, _ := access(x)
		b, _ := access(y)
		if c := strings.Compare(a.table, b.table); c != 0 {
			return c
		}
		return strings.Compare(*a.uuid, *b.uuid)
	})
	for _, m := range stale {
		a, err := access(m)
		if err != nil {
			return err
		}
		if infoOf(a.table).root {
			p.Delete = append(p.Delete, m)
			continue
		}
		parents, err := v.Referrers(ctx, a.table, *a.uuid)
		if err != nil {
			return err
		}
		for _, parent := range parents {
			pa, err := access(parent)
			if err != nil {
				return err
			}
			if staleUUIDs[*pa.uuid] {
				continue // deleted with its parent
			}
			p.Unlink = append(p.Unlink, Link{ParentTable: pa.table, ParentUUID: *pa.uuid, ParentName: pa.name,
				ChildTable: a.table, Child: *a.uuid})
		}
	}
	return nil
}
