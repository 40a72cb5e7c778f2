package nb

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// tableInfo says how a table hangs together. Rows of a root table exist on their own; rows of
// the other tables live only while a row of their parent table references them: OVSDB deletes
// an unreferenced non-root row at the end of the transaction (garbage collection), so a
// non-root row is created together with the reference to it and removed by dropping that
// reference.
//
// Some root tables are also referenced weakly (a switch's load_balancer column): OVSDB drops
// a weak reference when its row goes, and keeps the row when its referrers go. Such a row
// says in Row.ReferencedBy which rows must reference it; Diff links and unlinks.
type tableInfo struct {
	root      bool
	parent    string   // the table whose rows reference rows of this one, for non-root tables
	referrers []string // tables whose rows may reference rows of this root table weakly
}

var tables = map[string]tableInfo{
	LogicalSwitch:     {root: true},
	LogicalRouter:     {root: true},
	LogicalSwitchPort: {parent: LogicalSwitch},
	LogicalRouterPort: {parent: LogicalRouter},
	StaticRoute:       {parent: LogicalRouter},
	NAT:               {parent: LogicalRouter},
	LoadBalancer:      {root: true, referrers: []string{LoadBalancerGroup, LogicalSwitch, LogicalRouter}},
	LoadBalancerGroup: {root: true, referrers: []string{LogicalSwitch, LogicalRouter}},
	TemplateVar:       {root: true},
	PortGroup:         {root: true},
	AddressSet:        {root: true},
	ACL:               {parent: PortGroup},
	Meter:             {root: true},
	MeterBand:         {parent: Meter},
}

// TableNames lists the tables the master writes, roots first.
func TableNames() []string {
	return []string{LogicalSwitch, LogicalRouter, LoadBalancer, LoadBalancerGroup,
		TemplateVar, PortGroup, AddressSet, Meter,
		LogicalSwitchPort, LogicalRouterPort, StaticRoute, NAT, ACL, MeterBand}
}

// NewModel returns an empty model of table, or nil if the master does not write table.
func NewModel(table string) model.Model {
	switch table {
	case LogicalSwitch:
		return &nbdb.LogicalSwitch{}
	case LogicalRouter:
		return &nbdb.LogicalRouter{}
	case LogicalSwitchPort:
		return &nbdb.LogicalSwitchPort{}
	case LogicalRouterPort:
		return &nbdb.LogicalRouterPort{}
	case StaticRoute:
		return &nbdb.LogicalRouterStaticRoute{}
	case NAT:
		return &nbdb.NAT{}
	case LoadBalancer:
		return &nbdb.LoadBalancer{}
	case LoadBalancerGroup:
		return &nbdb.LoadBalancerGroup{}
	case TemplateVar:
		return &nbdb.ChassisTemplateVar{}
	case PortGroup:
		return &nbdb.PortGroup{}
	case AddressSet:
		return &nbdb.AddressSet{}
	case ACL:
		return &nbdb.ACL{}
	case Meter:
		return &nbdb.Meter{}
	case MeterBand:
		return &nbdb.MeterBand{}
	}
	return nil
}

// rowOf gives uniform access to the columns Plan needs of a model: its table, _uuid,
// external_ids, and the columns the master manages (compared and updated as a whole).
// Reference columns to child rows are never in the managed columns: other owners' children
// hang there too, so they change only by mutation.
type rowOf struct {
	table   string
	uuid    *string
	ids     *map[string]string
	name    string // for messages
	managed []any  // pointers to the managed columns
}

func access(m model.Model) (rowOf, error) {
	switch r := m.(type) {
	case *nbdb.LogicalSwitch:
		return rowOf{LogicalSwitch, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.OtherConfig, &r.ExternalIDs}}, nil
	case *nbdb.LogicalRouter:
		return rowOf{LogicalRouter, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Options, &r.ExternalIDs}}, nil
	case *nbdb.LogicalSwitchPort:
		return rowOf{LogicalSwitchPort, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Type, &r.Addresses, &r.PortSecurity, &r.Options, &r.ExternalIDs}}, nil
	case *nbdb.LogicalRouterPort:
		return rowOf{LogicalRouterPort, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.MAC, &r.Networks, &r.Options, &r.ExternalIDs}}, nil
	case *nbdb.LogicalRouterStaticRoute:
		return rowOf{StaticRoute, &r.UUID, &r.ExternalIDs, r.IPPrefix + " via " + r.Nexthop,
			[]any{&r.IPPrefix, &r.Nexthop, &r.Policy, &r.OutputPort, &r.ExternalIDs}}, nil
	case *nbdb.NAT:
		return rowOf{NAT, &r.UUID, &r.ExternalIDs, r.Type + " " + r.LogicalIP + " to " + r.ExternalIP,
			[]any{&r.Type, &r.ExternalIP, &r.LogicalIP, &r.ExternalIDs}}, nil
	case *nbdb.LoadBalancer:
		return rowOf{LoadBalancer, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Vips, &r.Protocol, &r.Options, &r.ExternalIDs}}, nil
	case *nbdb.LoadBalancerGroup:
		// No external_ids column: the marks are implied by the name (FromName). Diff
		// writes the marks into this map, which goes nowhere.
		ids := map[string]string{}
		if id, ok := FromName(LoadBalancerGroup, r.Name); ok {
			ids = id.ExternalIDs()
		}
		return rowOf{LoadBalancerGroup, &r.UUID, &ids, r.Name, []any{&r.Name}}, nil
	case *nbdb.ChassisTemplateVar:
		return rowOf{TemplateVar, &r.UUID, &r.ExternalIDs, r.Chassis,
			[]any{&r.Chassis, &r.Variables, &r.ExternalIDs}}, nil
	case *nbdb.PortGroup:
		// ports holds weak references to pod ports of other owners; the controller computes
		// the whole set from the cache, so it is managed like any column.
		return rowOf{PortGroup, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Ports, &r.ExternalIDs}}, nil
	case *nbdb.AddressSet:
		return rowOf{AddressSet, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Addresses, &r.ExternalIDs}}, nil
	case *nbdb.ACL:
		name := ""
		if r.Name != nil {
			name = *r.Name
		}
		return rowOf{ACL, &r.UUID, &r.ExternalIDs, name,
			[]any{&r.Name, &r.Direction, &r.Priority, &r.Match, &r.Action, &r.Log, &r.Severity, &r.Meter, &r.Options, &r.ExternalIDs}}, nil
	case *nbdb.Meter:
		return rowOf{Meter, &r.UUID, &r.ExternalIDs, r.Name,
			[]any{&r.Name, &r.Unit, &r.Fair, &r.ExternalIDs}}, nil
	case *nbdb.MeterBand:
		return rowOf{MeterBand, &r.UUID, &r.ExternalIDs, r.Action,
			[]any{&r.Action, &r.Rate, &r.BurstSize, &r.ExternalIDs}}, nil
	}
	return rowOf{}, fmt.Errorf("nbsync: the master does not write rows of type %T", m)
}

// refColumn returns the column of parent that references rows of childTable.
func refColumn(parent model.Model, childTable string) (*[]string, error) {
	switch p := parent.(type) {
	case *nbdb.LogicalSwitch:
		switch childTable {
		case LogicalSwitchPort:
			return &p.Ports, nil
		case LoadBalancer:
			return &p.LoadBalancer, nil
		case LoadBalancerGroup:
			return &p.LoadBalancerGroup, nil
		}
	case *nbdb.LogicalRouter:
		switch childTable {
		case LogicalRouterPort:
			return &p.Ports, nil
		case StaticRoute:
			return &p.StaticRoutes, nil
		case NAT:
			return &p.Nat, nil
		case LoadBalancer:
			return &p.LoadBalancer, nil
		case LoadBalancerGroup:
			return &p.LoadBalancerGroup, nil
		}
	case *nbdb.LoadBalancerGroup:
		if childTable == LoadBalancer {
			return &p.LoadBalancer, nil
		}
	case *nbdb.PortGroup:
		if childTable == ACL {
			return &p.ACLs, nil
		}
	case *nbdb.Meter:
		if childTable == MeterBand {
			return &p.Bands, nil
		}
	}
	return nil, fmt.Errorf("nbsync: %T has no reference column for %s rows", parent, childTable)
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
		return nil, fmt.Errorf("nbsync: comparing a %s row with a %s row", e.table, d.table)
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
