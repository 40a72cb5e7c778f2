package nb

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/ovn-org/libovsdb/model"
)

// table describes one Northbound table the master writes, whose rows are models of type T.
// Everything the package knows about a table's shape is here; the registry (tables.go) lists one
// descriptor per table and the rest of the package asks the registry.
type table[T any] struct {
	name string
	// parent is the table whose rows hold (strong) references to this table's rows, for a
	// non-root table; "" for a root table. See tableInfo.
	parent string
	// referrers are the tables whose rows may hold references to rows of this root table
	// (a load balancer on a switch, in a group): Row.ReferencedBy names such rows.
	referrers []string
	// refs are this table's reference columns to the rows of the master's other tables, by
	// the referenced table: the parent side of every parent and referrer above.
	refs map[string]func(*T) *[]string
	// row gives access to the columns of a row.
	row func(*T) columns
	// named lists the rows the master owns in a table without external_ids, by name: their
	// owner marks are implied by the name.
	named map[string]ID
}

// columns are the columns of one row the package works with.
type columns struct {
	uuid *string
	// ids is the external_ids column, nil for a table without one (then table.named says
	// which rows are ours).
	ids   *map[string]string
	label string // names the row in messages
	// managed are pointers to the columns the master owns and writes as a whole, compared
	// in this order by changedFields. Reference columns to child rows are never managed:
	// other owners' children hang there too, so they change only by mutation.
	managed []any
}

// tableInfo says how a table hangs together. Rows of a root table exist on their own; rows of
// the other tables live only while a row of their parent table references them: OVSDB deletes
// an unreferenced non-root row at the end of the transaction (garbage collection), so a
// non-root row is created together with the reference to it and removed by dropping that
// reference.
//
// Some root tables are also referenced from rows of other owners (a switch's load_balancer
// column): such a row says in Row.ReferencedBy which rows must reference it, and Diff links
// and unlinks. The load balancer references are weak, so OVSDB drops them when the load
// balancer goes and keeps the load balancer when its referrers go.
type tableInfo struct {
	name      string
	root      bool
	parent    string
	referrers []string
	// unmarked tables have no external_ids column; their rows' IDs come from FromName.
	unmarked bool
	named    map[string]ID
}

// tableDesc is a descriptor with its row type erased, as the registry holds it.
type tableDesc interface {
	info() tableInfo
	newModel() model.Model
	// access returns the columns of m, false if m is not a row of this table.
	access(m model.Model) (rowOf, bool)
	// refColumn returns the reference column of m, a row of this table, for rows of child.
	refColumn(m model.Model, child string) (*[]string, bool)
	// refPredicate is a typed libovsdb cache predicate for rows of this table whose
	// reference column for child holds uuid.
	refPredicate(child, uuid string) (any, bool)
	// children lists the tables this table has reference columns for, sorted.
	children() []string
	modelType() reflect.Type
}

func (t *table[T]) info() tableInfo {
	var zero T
	return tableInfo{name: t.name, root: t.parent == "", parent: t.parent, referrers: t.referrers,
		unmarked: t.row(&zero).ids == nil, named: t.named}
}

func (t *table[T]) newModel() model.Model { return new(T) }

func (t *table[T]) modelType() reflect.Type { return reflect.TypeFor[*T]() }

func (t *table[T]) access(m model.Model) (rowOf, bool) {
	r, ok := m.(*T)
	if !ok {
		return rowOf{}, false
	}
	c := t.row(r)
	if c.ids == nil {
		// No external_ids column: the marks are implied by the name. Diff writes the marks
		// into this map, which goes nowhere.
		ids := map[string]string{}
		if id, ok := t.named[c.label]; ok {
			ids = id.ExternalIDs()
		}
		c.ids = &ids
	}
	return rowOf{table: t.name, uuid: c.uuid, ids: c.ids, name: c.label, managed: c.managed}, true
}

func (t *table[T]) refColumn(m model.Model, child string) (*[]string, bool) {
	r, ok := m.(*T)
	col, found := t.refs[child]
	if !ok || !found {
		return nil, false
	}
	return col(r), true
}

func (t *table[T]) refPredicate(child, uuid string) (any, bool) {
	col, ok := t.refs[child]
	if !ok {
		return nil, false
	}
	// Typed, so that libovsdb calls it on the cached rows directly: a condition on a set
	// column would be evaluated by reflection over every element of every row, and the
	// cluster load balancer group holds one UUID per Service.
	return func(r *T) bool { return slices.Contains(*col(r), uuid) }, true
}

func (t *table[T]) children() []string { return slices.Sorted(maps.Keys(t.refs)) }

// registry holds the descriptors of the tables the master writes, in the order they were
// registered: roots first.
type registry struct {
	order  []tableDesc
	names  []string // of order
	byName map[string]tableDesc
	byType map[reflect.Type]tableDesc
	infos  map[string]tableInfo // computed once: Diff asks for them in every loop
}

func newRegistry(descs ...tableDesc) *registry {
	r := &registry{order: descs, byName: map[string]tableDesc{}, byType: map[reflect.Type]tableDesc{},
		infos: map[string]tableInfo{}}
	for _, d := range descs {
		info := d.info()
		r.names = append(r.names, info.name)
		r.byName[info.name] = d
		r.byType[d.modelType()] = d
		r.infos[info.name] = info
	}
	return r
}

// describe returns the descriptor of m's table.
func (r *registry) describe(m model.Model) (tableDesc, error) {
	d, ok := r.byType[reflect.TypeOf(m)]
	if !ok {
		return nil, fmt.Errorf("nb: the master does not write rows of type %T", m)
	}
	return d, nil
}

// infoOf returns how table hangs together; the zero tableInfo for a table the master does not
// write.
func infoOf(table string) tableInfo { return tables.infos[table] }

// TableNames lists the tables the master writes, roots first.
func TableNames() []string {
	return slices.Clone(tables.names)
}

// NewModel returns an empty model of table, or nil if the master does not write table.
func NewModel(table string) model.Model {
	if d, ok := tables.byName[table]; ok {
		return d.newModel()
	}
	return nil
}

// Unmarked reports whether rows of table carry no external_ids; their ID comes from FromName.
func Unmarked(table string) bool { return infoOf(table).unmarked }

// FromName returns the ID of the row of table (one without external_ids) called name, if
// the master owns such a row.
func FromName(table, name string) (ID, bool) {
	id, ok := infoOf(table).named[name]
	return id, ok
}

// HasNamed reports whether kind owns rows of table by name (FromName).
func HasNamed(kind Kind, table string) bool {
	for _, id := range infoOf(table).named {
		if id.Kind == kind {
			return true
		}
	}
	return false
}

// rowOf gives uniform access to the columns Plan needs of a model: its table, _uuid,
// external_ids, and the columns the master manages (compared and updated as a whole).
type rowOf struct {
	table   string
	uuid    *string
	ids     *map[string]string
	name    string // for messages
	managed []any  // pointers to the managed columns
}

func access(m model.Model) (rowOf, error) {
	d, err := tables.describe(m)
	if err != nil {
		return rowOf{}, err
	}
	a, _ := d.access(m)
	return a, nil
}

// refColumn returns the column of parent that references rows of childTable.
func refColumn(parent model.Model, childTable string) (*[]string, error) {
	if d, err := tables.describe(parent); err == nil {
		if col, ok := d.refColumn(parent, childTable); ok {
			return col, nil
		}
	}
	return nil, fmt.Errorf("nb: %T has no reference column for %s rows", parent, childTable)
}

// refPredicate is a libovsdb cache predicate for rows of table whose reference column for
// childTable holds uuid. A table without that column is an error, not an empty answer (which
// would leave stale references behind).
func refPredicate(table, childTable, uuid string) (any, error) {
	if d, ok := tables.byName[table]; ok {
		if pred, ok := d.refPredicate(childTable, uuid); ok {
			return pred, nil
		}
	}
	return nil, fmt.Errorf("nb: no reference lookup for %s rows in %s rows", childTable, table)
}

// sameValue compares two managed columns (pointers to fields of the same type) the way
// OVSDB does: sets ignore order, and an empty set or map equals an absent one.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case *string:
		return *x == *b.(*string)
	case *int:
		return *x == *b.(*int)
	case *bool:
		return *x == *b.(*bool)
	case *[]string:
		return sameSet(*x, *b.(*[]string))
	case *map[string]string:
		return maps.Equal(*x, *b.(*map[string]string))
	case **string:
		y := b.(**string)
		return (*x == nil && *y == nil) || (*x != nil && *y != nil && **x == **y)
	case **bool:
		y := b.(**bool)
		return (*x == nil && *y == nil) || (*x != nil && *y != nil && **x == **y)
	}
	return false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// changedFields returns the managed columns of desired (pointers into it) that differ from
// existing's.
func changedFields(existing, desired model.Model) ([]any, error) {
	e, err := access(existing)
	if err != nil {
		return nil, err
	}
	d, err := access(desired)
	if err != nil {
		return nil, err
	}
	if e.table != d.table {
		return nil, fmt.Errorf("nb: comparing a %s row with a %s row", e.table, d.table)
	}
	var changed []any
	for i := range d.managed {
		if !sameValue(e.managed[i], d.managed[i]) {
			changed = append(changed, d.managed[i])
		}
	}
	return changed, nil
}

// ManagedEqual reports whether a and b, two rows of one table, agree on every column the
// master manages. Controllers use it to ignore cache updates that only touched reference
// columns (another owner's child added to a switch) or columns OVN fills in.
func ManagedEqual(a, b model.Model) bool {
	changed, err := changedFields(a, b)
	return err == nil && len(changed) == 0
}
