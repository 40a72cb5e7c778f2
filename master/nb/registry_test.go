package nb

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// checkRegistry returns what is wrong with reg, given the roles that write rows and the NB
// schema: a mistake in a descriptor shows up here rather than as a runtime error ("no
// reference lookup", "does not write rows of type") or, worse, as a column never compared.
func checkRegistry(reg *registry, roles map[Role]roleSpec, schema ovsdb.DatabaseSchema) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return []error{err}
	}
	db, verrs := model.NewDatabaseModel(schema, dbModel)
	if len(verrs) > 0 {
		return verrs
	}

	for _, role := range slices.Sorted(maps.Keys(roles)) {
		spec := roles[role]
		info, ok := reg.infos[spec.table]
		if !ok {
			bad("role %s: its table %q has no descriptor", role, spec.table)
			continue
		}
		if info.unmarked && !slices.ContainsFunc(slices.Collect(maps.Values(info.named)), func(id ID) bool { return id.Role == role }) {
			bad("role %s: %s rows carry no marks, and no row of the role is known by name", role, spec.table)
		}
	}

	pos := map[string]int{}
	for i, d := range reg.order {
		info := d.info()
		if _, dup := pos[info.name]; dup {
			bad("%s: registered twice", info.name)
		}
		pos[info.name] = i
	}
	if len(reg.byType) != len(reg.order) {
		bad("%d descriptors for %d model types", len(reg.order), len(reg.byType))
	}

	for i, d := range reg.order {
		info := d.info()
		ts := schema.Table(info.name)
		if ts == nil {
			bad("%s: not a table of the NB schema", info.name)
			continue
		}
		if want := db.Types()[info.name]; d.modelType() != want {
			bad("%s: model type %v, the generated model is %v", info.name, d.modelType(), want)
		}
		if info.root != ts.IsRoot {
			bad("%s: root %v in the registry, isRoot %v in the schema", info.name, info.root, ts.IsRoot)
		}
		if i > 0 && info.root && !reg.order[i-1].info().root {
			bad("%s: a root table registered after a non-root one (TableNames promises roots first)", info.name)
		}

		// The parent and every referrer hold a reference column for this table.
		holders := info.referrers
		if !info.root {
			if len(info.referrers) > 0 {
				bad("%s: a non-root table has referrers; its parent alone references it", info.name)
			}
			holders = []string{info.parent}
			if p, ok := pos[info.parent]; !ok || p > i {
				bad("%s: parent %s is not registered before it", info.name, info.parent)
			}
		}
		for _, h := range holders {
			hd, ok := reg.byName[h]
			if !ok {
				bad("%s: referenced from %s, which has no descriptor", info.name, h)
				continue
			}
			if _, ok := hd.refColumn(hd.newModel(), info.name); !ok {
				bad("%s: %s has no reference column for it", info.name, h)
			}
		}

		m := d.newModel()
		tags := fieldTags(m)
		a, ok := d.access(m)
		if !ok {
			bad("%s: access refuses its own model %T", info.name, m)
			continue
		}
		if tags[ptr(a.uuid)] != "_uuid" {
			bad("%s: uuid is not the _uuid column", info.name)
		}
		_, hasIDs := ts.Columns["external_ids"]
		switch {
		case info.unmarked && hasIDs:
			bad("%s: has external_ids in the schema, but the descriptor reads none", info.name)
		case info.unmarked && len(info.named) == 0:
			bad("%s: no external_ids and no rows known by name", info.name)
		case !info.unmarked && tags[ptr(a.ids)] != "external_ids":
			bad("%s: ids is not the external_ids column", info.name)
		}

		refCols := map[string]bool{}
		for _, child := range d.children() {
			col, _ := d.refColumn(m, child)
			name := tags[ptr(col)]
			refCols[name] = true
			cs := ts.Column(name)
			if cs == nil || cs.TypeObj == nil || cs.TypeObj.Key == nil {
				bad("%s: reference column for %s is %q, not a column of the schema", info.name, child, name)
				continue
			}
			if ref, _ := cs.TypeObj.Key.RefTable(); ref != child {
				bad("%s.%s references %q in the schema, the descriptor says %s", info.name, name, ref, child)
			}
			cinfo, ok := reg.infos[child]
			switch {
			case !ok:
				bad("%s.%s: %s has no descriptor", info.name, name, child)
			case !cinfo.root && cinfo.parent != info.name:
				bad("%s.%s: %s rows hang on %s, not here", info.name, name, child, cinfo.parent)
			case cinfo.root && !slices.Contains(cinfo.referrers, info.name):
				bad("%s.%s: %s does not list %s among its referrers", info.name, name, child, info.name)
			case !cinfo.root:
				// Garbage collection of the child relies on its parent's reference alone.
				if rt, _ := cs.TypeObj.Key.RefType(); rt != ovsdb.Strong {
					bad("%s.%s: a %s reference to non-root %s rows", info.name, name, rt, child)
				}
			}
		}

		seen := map[string]bool{}
		for _, col := range a.managed {
			name, ok := tags[ptr(col)]
			switch {
			case !ok:
				bad("%s: a managed column (%T) is not a field of %T", info.name, col, m)
			case ts.Column(name) == nil || name == "_uuid":
				bad("%s: managed column %q is not a column of the schema", info.name, name)
			case seen[name]:
				bad("%s: managed column %q listed twice", info.name, name)
			case refCols[name]:
				bad("%s: managed column %q holds other owners' references; it changes by mutation only", info.name, name)
			}
			seen[name] = true
		}
		if !info.unmarked && !seen["external_ids"] {
			bad("%s: external_ids is not managed: the marks would never be written back", info.name)
		}
	}
	return errs
}

// fieldTags maps the address of every field of m (a pointer to a struct) to its ovsdb tag.
func fieldTags(m model.Model) map[uintptr]string {
	v := reflect.ValueOf(m).Elem()
	out := map[uintptr]string{}
	for i := range v.NumField() {
		if tag := v.Type().Field(i).Tag.Get("ovsdb"); tag != "" {
			out[v.Field(i).Addr().Pointer()] = tag
		}
	}
	return out
}

func ptr(p any) uintptr {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	return v.Pointer()
}

// TestRegistry checks the descriptors of tables.go against the roles and the NB schema.
func TestRegistry(t *testing.T) {
	for _, err := range checkRegistry(tables, roles, nbdb.Schema()) {
		t.Error(err)
	}
}

// TestRegistryCheckCatches feeds checkRegistry broken registries: each mistake a maintainer
// adding a table could make must fail TestRegistry.
func TestRegistryCheckCatches(t *testing.T) {
	without := func(drop tableDesc) []tableDesc {
		return slices.DeleteFunc(slices.Clone(tables.order), func(d tableDesc) bool { return d == drop })
	}
	replace := func(old, new tableDesc) []tableDesc {
		out := slices.Clone(tables.order)
		out[slices.Index(out, old)] = new
		return out
	}

	lsNoPorts := *logicalSwitch
	lsNoPorts.refs = maps.Clone(logicalSwitch.refs)
	delete(lsNoPorts.refs, nbdb.LogicalSwitchPortTable)

	lrNoLB := *logicalRouter
	lrNoLB.refs = maps.Clone(logicalRouter.refs)
	delete(lrNoLB.refs, nbdb.LoadBalancerTable)

	lspStray := *logicalSwitchPort
	lspStray.row = func(r *nbdb.LogicalSwitchPort) columns {
		c := logicalSwitchPort.row(r)
		c.managed = append(c.managed, new(string))
		return c
	}
	lspUp := *logicalSwitchPort
	lspUp.row = func(r *nbdb.LogicalSwitchPort) columns {
		c := logicalSwitchPort.row(r)
		c.managed = append(c.managed, &r.UUID)
		return c
	}
	lsManagedPorts := *logicalSwitch
	lsManagedPorts.row = func(r *nbdb.LogicalSwitch) columns {
		c := logicalSwitch.row(r)
		c.managed = append(c.managed, &r.Ports)
		return c
	}
	bogus := &table[bogusPort]{name: nbdb.LogicalSwitchPortTable, parent: nbdb.LogicalSwitchTable,
		row: func(r *bogusPort) columns {
			return columns{uuid: &r.UUID, ids: &r.ExternalIDs, managed: []any{&r.Bogus, &r.ExternalIDs}}
		}}

	for _, tc := range []struct {
		name  string
		descs []tableDesc
		want  string
	}{
		{"a role's table without a descriptor", without(chassisTemplateVar), "role template-vars: its table"},
		{"a parent without the reference column", replace(logicalSwitch, &lsNoPorts), "Logical_Switch has no reference column"},
		{"a referrer without the reference column", replace(logicalRouter, &lrNoLB), "Logical_Router has no reference column"},
		{"a managed pointer that is no field", replace(logicalSwitchPort, &lspStray), "is not a field of"},
		{"a managed column that is _uuid", replace(logicalSwitchPort, &lspUp), `"_uuid" is not a column`},
		{"a managed reference column", replace(logicalSwitch, &lsManagedPorts), `"ports" holds other owners' references`},
		{"a model column not in the schema", replace(logicalSwitchPort, bogus), `"bogus" is not a column of the schema`},
		{"roots not first", append(without(meter), meter), "Meter: a root table registered after"},
		{"a child before its parent", append([]tableDesc{logicalSwitchPort}, without(logicalSwitchPort)...), "parent Logical_Switch is not registered before"},
	} {
		errs := checkRegistry(newRegistry(tc.descs...), roles, nbdb.Schema())
		if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), tc.want) }) {
			t.Errorf("%s: no error %q among %v", tc.name, tc.want, errs)
		}
	}
}

// bogusPort claims a column the NB schema does not have.
type bogusPort struct {
	UUID        string            `ovsdb:"_uuid"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
	Bogus       string            `ovsdb:"bogus"`
}
