package nb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
)

// Row is one row the master wants in the NB.
type Row struct {
	ID ID
	// Model is the row: a *nbdb model of ID's table with every managed column set. Its
	// external_ids may carry extra keys; Diff adds ID's marks. Reference columns to child rows
	// are left empty: children say who their parent is.
	Model model.Model
	// Parent is the row that references this one, for rows of non-root tables (ports,
	// routes, NAT); zero for switches and routers. It may belong to another owner.
	Parent ID
	// ReferencedBy are the rows that must reference this root row (a load balancer in a load
	// balancer group or on a router), for tables that have such referrers (tables.go). They may
	// belong to other owners. Diff links the row where a reference is missing and unlinks it
	// from every other row that references it.
	ReferencedBy []ID
}

// View is what Diff reads of the database. Implementations return copies.
type View interface {
	// Owned returns the rows of the master's tables whose owner marks name k.
	Owned(ctx context.Context, k Key) ([]model.Model, error)
	// Referrers returns the rows that hold uuid, a row of childTable, in their reference
	// column for that table.
	Referrers(ctx context.Context, childTable, uuid string) ([]model.Model, error)
}

// MissingParentError says a row's parent belongs to another owner and does not exist yet;
// that owner's sync creates it, and the caller tries again later.
type MissingParentError struct {
	Row, Parent ID
}

func (e *MissingParentError) Error() string {
	return fmt.Sprintf("nb: %s needs %s, which does not exist yet", e.Row, e.Parent)
}

// Waiting says what the row waits for (reconcile.Waiting): the key is retried quietly until
// the parent's owner has created it.
func (e *MissingParentError) Waiting() string { return e.Parent.String() }

// Update sets the Fields (pointers into Row) of the existing row Row names by its UUID.
type Update struct {
	Row    model.Model
	Fields []any
}

// Link adds (or, in Plan.Unlink, removes) Child, a row of ChildTable, to the reference
// column of the existing row ParentUUID of ParentTable.
type Link struct {
	ParentTable, ParentUUID, ParentName string
	ChildTable, Child                   string // Child is a UUID or a named UUID of Plan.Create
}

// Plan is what one owner's rows need. The zero Plan changes nothing.
type Plan struct {
	// Create holds new rows with named UUIDs, non-root rows first; a new parent already
	// references its new children. The named UUIDs are unique within this plan only: plans
	// sharing a transaction go through Merge.
	Create []model.Model
	Update []Update
	Link   []Link
	Unlink []Link
	// Delete holds rows of root tables. Stale non-root rows are removed by unlinking them,
	// and rows of a deleted root row's reference columns go with it.
	Delete []model.Model
	// Created are the IDs of the rows in Create.
	Created []ID
}

// Empty reports whether p changes nothing.
func (p *Plan) Empty() bool {
	return len(p.Create)+len(p.Update)+len(p.Link)+len(p.Unlink)+len(p.Delete) == 0
}

func (p *Plan) String() string {
	return fmt.Sprintf("create %d, update %d, link %d, unlink %d, delete %d",
		len(p.Create), len(p.Update), len(p.Link), len(p.Unlink), len(p.Delete))
}

// planned is a desired row's fate: the existing row that keeps playing its role, or the
// new one.
type planned struct {
	uuid    string      // real, or named for a created row
	model   model.Model // the existing row, or the row to create
	table   string
	created bool
}

// Diff returns the plan that makes the rows owned by scope equal to desired.
func Diff(ctx context.Context, v View, scope Key, desired []Row) (*Plan, error) {
	if err := validate(scope, desired); err != nil {
		return nil, err
	}
	existing, err := v.Owned(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("nb: rows of %s: %w", scope, err)
	}
	groups, stale, err := groupByID(scope, existing)
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	state := make(map[ID]*planned, len(desired))
	var creates []*planned
	for i, r := range desired {
		keep, extra := pickKeeper(groups[r.ID], r.Model)
		delete(groups, r.ID)
		stale = append(stale, extra...)
		pl, err := p.matchOrCreate(i, r, keep)
		if err != nil {
			return nil, err
		}
		state[r.ID] = pl
		if pl.created {
			creates = append(creates, pl)
			p.Created = append(p.Created, r.ID)
		}
	}
	for _, rest := range groups {
		stale = append(stale, rest...)
	}
	staleUUIDs := map[string]bool{}
	for _, m := range stale {
		a, _ := access(m)
		staleUUIDs[*a.uuid] = true
	}
	for _, r := range desired {
		if r.Parent == (ID{}) {
			continue
		}
		if err := p.attach(ctx, v, scope, state, r, staleUUIDs); err != nil {
			return nil, err
		}
	}
	for _, r := range desired {
		if len(infoOf(r.ID.Table()).referrers) == 0 {
			continue
		}
		if err := p.reference(ctx, v, scope, state, r, staleUUIDs); err != nil {
			return nil, err
		}
	}
	if err := p.remove(ctx, v, stale, staleUUIDs); err != nil {
		return nil, err
	}
	// Children before parents, so that every named UUID is defined before it is referenced
	// (ovsdb-server accepts either order; readers of a transaction log prefer this one).
	slices.SortStableFunc(creates, func(a, b *planned) int {
		return cmp.Compare(boolInt(infoOf(a.table).root), boolInt(infoOf(b.table).root))
	})
	for _, c := range creates {
		p.Create = append(p.Create, c.model)
	}
	return p, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// validate checks desired rows against the registry before anything is planned.
func validate(scope Key, desired []Row) error {
	seen := map[ID]bool{}
	for _, r := range desired {
		if err := r.ID.Validate(); err != nil {
			return err
		}
		if r.ID.Key != scope {
			return fmt.Errorf("nb: %s is not owned by %s", r.ID, scope)
		}
		if seen[r.ID] {
			return fmt.Errorf("nb: %s is desired twice", r.ID)
		}
		seen[r.ID] = true
		a, err := access(r.Model)
		if err != nil {
			return err
		}
		if a.table != r.ID.Table() {
			return fmt.Errorf("nb: %s is a %s row, but role %s lives in %s", r.ID, a.table, r.ID.Role, r.ID.Table())
		}
		info := infoOf(a.table)
		hasParent := r.Parent != (ID{})
		if info.root && hasParent {
			return fmt.Errorf("nb: %s: a %s row has no parent", r.ID, a.table)
		}
		if !info.root && !hasParent {
			return fmt.Errorf("nb: %s: a %s row needs a parent", r.ID, a.table)
		}
		for _, ref := range r.ReferencedBy {
			if err := ref.Validate(); err != nil {
				return fmt.Errorf("nb: referrer of %s: %w", r.ID, err)
			}
			if !slices.Contains(info.referrers, ref.Table()) {
				return fmt.Errorf("nb: %s: a %s row cannot reference a %s row", r.ID, ref.Table(), a.table)
			}
		}
		if hasParent {
			if err := r.Parent.Validate(); err != nil {
				return fmt.Errorf("nb: parent of %s: %w", r.ID, err)
			}
			if r.Parent.Table() != info.parent {
				return fmt.Errorf("nb: %s: parent %s is a %s row, want %s", r.ID, r.Parent, r.Parent.Table(), info.parent)
			}
		}
	}
	return nil
}

// groupByID sorts the rows owned by scope by their ID. Rows whose marks are malformed, or
// whose role lives in another table, are stale.
func groupByID(scope Key, existing []model.Model) (map[ID][]model.Model, []model.Model, error) {
	groups := map[ID][]model.Model{}
	var stale []model.Model
	for _, m := range existing {
		a, err := access(m)
		if err != nil {
			return nil, nil, err
		}
		id, ours, err := FromExternalIDs(*a.ids)
		if !ours || id.Key != scope {
			continue
		}
		if err != nil || id.Table() != a.table {
			stale = append(stale, m)
			continue
		}
		groups[id] = append(groups[id], m)
	}
	return groups, stale, nil
}

// pickKeeper chooses which of the rows playing one role stays: one with the desired name if
// any, then the lowest UUID, so that every sync picks the same. The others are duplicates.
func pickKeeper(rows []model.Model, desired model.Model) (model.Model, []model.Model) {
	if len(rows) == 0 {
		return nil, nil
	}
	d, _ := access(desired)
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(x, y model.Model) int {
		a, _ := access(x)
		b, _ := access(y)
		if (a.name == d.name) != (b.name == d.name) {
			if a.name == d.name {
				return -1
			}
			return 1
		}
		return strings.Compare(*a.uuid, *b.uuid)
	})
	return rows[0], rows[1:]
}

// matchOrCreate plans desired row r (the i-th) against keep, its existing row or nil.
func (p *Plan) matchOrCreate(i int, r Row, keep model.Model) (*planned, error) {
	d := model.Clone(r.Model)
	a, err := access(d)
	if err != nil {
		return nil, err
	}
	ids := maps.Clone(*a.ids)
	if ids == nil {
		ids = map[string]string{}
	}
	maps.Copy(ids, r.ID.ExternalIDs())
	*a.ids = ids
	if keep == nil {
		// Unique within the plan only, so that Diff is a function of its inputs (the same
		// plan for the same rows). Named UUIDs are scoped to a transaction; plans that share
		// one go through Merge, which renames them apart.
		*a.uuid = fmt.Sprintf("%s%d", namedPrefix, i)
		return &planned{uuid: *a.uuid, model: d, table: a.table, created: true}, nil
	}
	k, _ := access(keep)
	*a.uuid = *k.uuid
	fields, err := changedFields(keep, d)
	if err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		p.Update = append(p.Update, Update{Row: d, Fields: fields})
	}
	return &planned{uuid: *k.uuid, model: keep, table: a.table}, nil
}

// namedPrefix starts every named UUID Diff gives a created row; Merge renames only these.
const namedPrefix = "new_"

// Merge returns one plan doing what plans do, for one transaction: start-up syncs many owners
// at once, and one transaction of many rows costs the NB far less than many of one row.
// Plans of different owners touch different rows, except for reference mutations, which
// merge cleanly.
//
// Each plan names its created rows apart from its other rows only, so Merge renames the
// named UUIDs of plan j from new_X to new_j_X, in its rows to create, their reference columns
// and its links. It renames copies: the plans passed in are left as they were (a caller may
// still log them, retry them alone, or merge them again).
func Merge(plans ...*Plan) *Plan {
	out := &Plan{}
	for j, p := range plans {
		rename := func(u string) string {
			if rest, ok := strings.CutPrefix(u, namedPrefix); ok {
				return fmt.Sprintf("%s%d_%s", namedPrefix, j, rest)
			}
			return u
		}
		for _, m := range p.Create {
			m = model.Clone(m)
			d, err := tables.describe(m)
			if err != nil {
				// Not a row Diff could have planned; Ops reports it.
				out.Create = append(out.Create, m)
				continue
			}
			a, _ := d.access(m)
			*a.uuid = rename(*a.uuid)
			for _, child := range d.children() {
				col, _ := d.refColumn(m, child)
				for i := range *col {
					(*col)[i] = rename((*col)[i])
				}
			}
			out.Create = append(out.Create, m)
		}
		for _, ls := range []struct{ from, to *[]Link }{{&p.Link, &out.Link}, {&p.Unlink, &out.Unlink}} {
			for _, l := range *ls.from {
				l.Child = rename(l.Child) // l is a copy
				*ls.to = append(*ls.to, l)
			}
		}
		// Updates and deletions name existing rows by their real UUIDs: nothing to rename,
		// and an Update's Fields point into its Row, so the row is shared, not copied.
		out.Update = append(out.Update, p.Update...)
		out.Delete = append(out.Delete, p.Delete...)
		out.Created = append(out.Created, p.Created...)
	}
	// Children before parents, as in Diff.
	slices.SortStableFunc(out.Create, func(a, b model.Model) int {
		x, _ := access(a)
		y, _ := access(b)
		return cmp.Compare(boolInt(infoOf(x.table).root), boolInt(infoOf(y.table).root))
	})
	return out
}
