package nb

import (
	"context"
	"fmt"
	"reflect"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// ClientIndexes are the libovsdb client indexes that make CacheView.Owned a lookup instead
// of a scan: every table the master writes is indexed by the owner name mark. Set them on the
// database model before creating the client (model.ClientDBModel.SetIndexes). Without them
// Owned still answers right, only slower.
func ClientIndexes() map[string][]model.ClientIndex {
	idx := map[string][]model.ClientIndex{}
	for _, t := range TableNames() {
		if Unmarked(t) {
			continue
		}
		idx[t] = []model.ClientIndex{{Columns: []model.ColumnKey{{Column: "external_ids", Key: NameKey}}}}
	}
	return idx
}

// CacheView is the View of a libovsdb client's cache.
type CacheView struct {
	c client.Client
}

// NewCacheView returns the View of c's cache. c must monitor every table of TableNames.
func NewCacheView(c client.Client) CacheView { return CacheView{c: c} }

// Owned returns the cached rows whose marks name k, from every table the master writes.
func (v CacheView) Owned(ctx context.Context, k Key) ([]model.Model, error) {
	var out []model.Model
	for _, table := range TableNames() {
		probe := NewModel(table)
		if Unmarked(table) {
			if !HasNamed(k.Kind, table) {
				continue
			}
			// A few rows at most, found by name.
			rows, err := list(ctx, v.c, probe)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", table, err)
			}
			for _, m := range rows {
				if key, ours := OwnerOf(m); ours && key == k {
					out = append(out, m)
				}
			}
			continue
		}
		a, _ := access(probe)
		// Two single-key conditions rather than one two-key map, so that the cache answers
		// the first from the client index on the owner name and checks the kind on the few
		// rows found.
		api := v.c.WhereAll(probe,
			model.Condition{Field: a.ids, Function: ovsdb.ConditionIncludes, Value: map[string]string{NameKey: k.Name}},
			model.Condition{Field: a.ids, Function: ovsdb.ConditionIncludes, Value: map[string]string{KindKey: string(k.Kind)}},
		)
		rows, err := list(ctx, api, probe)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// Referrers returns the cached rows that reference uuid, a row of childTable: rows of its
// parent table, or of the referrer tables of a root table (Row.ReferencedBy).
func (v CacheView) Referrers(ctx context.Context, childTable, uuid string) ([]model.Model, error) {
	info := infoOf(childTable)
	if info.name == "" || (info.root && len(info.referrers) == 0) {
		return nil, fmt.Errorf("nb: %s rows have no referrers", childTable)
	}
	from := info.referrers
	if !info.root {
		from = []string{info.parent}
	}
	var out []model.Model
	for _, t := range from {
		// A typed predicate over the cached rows (see table.refPredicate).
		pred, err := refPredicate(t, childTable, uuid)
		if err != nil {
			return nil, err
		}
		rows, err := list(ctx, v.c.WhereCache(pred), NewModel(t))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// All returns every cached row of the tables the master writes.
func (v CacheView) All(ctx context.Context) ([]model.Model, error) {
	var out []model.Model
	for _, table := range TableNames() {
		rows, err := list(ctx, v.c, NewModel(table))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// list runs api.List into a slice of probe's type and returns its elements as models.
func list(ctx context.Context, api interface {
	List(context.Context, interface{}) error
}, probe model.Model) ([]model.Model, error) {
	slice := reflect.New(reflect.SliceOf(reflect.TypeOf(probe)))
	if err := api.List(ctx, slice.Interface()); err != nil {
		return nil, err
	}
	out := make([]model.Model, 0, slice.Elem().Len())
	for i := 0; i < slice.Elem().Len(); i++ {
		out = append(out, slice.Elem().Index(i).Interface().(model.Model))
	}
	return out, nil
}

// OwnerOf returns the owner key marked on m, if m is one of the master's rows.
func OwnerOf(m model.Model) (Key, bool) {
	a, err := access(m)
	if err != nil {
		return Key{}, false
	}
	id, ours, _ := FromExternalIDs(*a.ids)
	return id.Key, ours
}

// IDOf returns the ID marked on m, if m is one of the master's rows with valid marks.
func IDOf(m model.Model) (ID, bool) {
	a, err := access(m)
	if err != nil {
		return ID{}, false
	}
	id, ours, err := FromExternalIDs(*a.ids)
	return id, ours && err == nil
}
