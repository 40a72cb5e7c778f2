package nb

import (
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// The descriptors of the Northbound tables the master writes, one per table. Adding a table
// is one descriptor here and one entry in tables below; its roles go into roles (owner.go).
// TestRegistry checks the descriptors against the NB schema.

// tables is the registry: every table the master writes, in dependency order (roots
// first, then each non-root table after its parent). TableNames keeps this order.
var tables = newRegistry(
	logicalSwitch, logicalRouter, loadBalancer, loadBalancerGroup, chassisTemplateVar,
	portGroup, addressSet, meter,
	logicalSwitchPort, logicalRouterPort, staticRoute, routerPolicy, nat, acl, meterBand,
)

var logicalSwitch = &table[nbdb.LogicalSwitch]{
	name: nbdb.LogicalSwitchTable,
	refs: map[string]func(*nbdb.LogicalSwitch) *[]string{
		nbdb.LogicalSwitchPortTable: func(r *nbdb.LogicalSwitch) *[]string { return &r.Ports },
		nbdb.LoadBalancerTable:      func(r *nbdb.LogicalSwitch) *[]string { return &r.LoadBalancer },
		nbdb.LoadBalancerGroupTable: func(r *nbdb.LogicalSwitch) *[]string { return &r.LoadBalancerGroup },
	},
	row: func(r *nbdb.LogicalSwitch) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.OtherConfig, &r.ExternalIDs}}
	},
}

var logicalRouter = &table[nbdb.LogicalRouter]{
	name: nbdb.LogicalRouterTable,
	refs: map[string]func(*nbdb.LogicalRouter) *[]string{
		nbdb.LogicalRouterPortTable:        func(r *nbdb.LogicalRouter) *[]string { return &r.Ports },
		nbdb.LogicalRouterStaticRouteTable: func(r *nbdb.LogicalRouter) *[]string { return &r.StaticRoutes },
		nbdb.LogicalRouterPolicyTable:      func(r *nbdb.LogicalRouter) *[]string { return &r.Policies },
		nbdb.NATTable:                      func(r *nbdb.LogicalRouter) *[]string { return &r.Nat },
		nbdb.LoadBalancerTable:             func(r *nbdb.LogicalRouter) *[]string { return &r.LoadBalancer },
		nbdb.LoadBalancerGroupTable:        func(r *nbdb.LogicalRouter) *[]string { return &r.LoadBalancerGroup },
	},
	row: func(r *nbdb.LogicalRouter) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Options, &r.ExternalIDs}}
	},
}

// A load balancer hangs on switches, routers and load balancer groups of other owners, by
// weak references.
var loadBalancer = &table[nbdb.LoadBalancer]{
	name:      nbdb.LoadBalancerTable,
	referrers: []string{nbdb.LoadBalancerGroupTable, nbdb.LogicalSwitchTable, nbdb.LogicalRouterTable},
	row: func(r *nbdb.LoadBalancer) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Vips, &r.Protocol, &r.Options, &r.ExternalIDs}}
	},
}

// ClusterLBGroupName is the name of the cluster's load balancer group. Load_Balancer_Group
// has no external_ids column in the 23.03 schema, so its marks are implied by its name.
const ClusterLBGroupName = "ovnt_cluster_lbg"

// Load_Balancer_Group has no external_ids column: the master's rows are known by name.
var loadBalancerGroup = &table[nbdb.LoadBalancerGroup]{
	name:      nbdb.LoadBalancerGroupTable,
	referrers: []string{nbdb.LogicalSwitchTable, nbdb.LogicalRouterTable},
	refs: map[string]func(*nbdb.LoadBalancerGroup) *[]string{
		nbdb.LoadBalancerTable: func(r *nbdb.LoadBalancerGroup) *[]string { return &r.LoadBalancer },
	},
	row: func(r *nbdb.LoadBalancerGroup) columns {
		return columns{uuid: &r.UUID, label: r.Name, managed: []any{&r.Name}}
	},
	named: map[string]ID{ClusterLBGroupName: NewID(Cluster, ClusterName, ClusterLBGroup)},
}

var chassisTemplateVar = &table[nbdb.ChassisTemplateVar]{
	name: nbdb.ChassisTemplateVarTable,
	row: func(r *nbdb.ChassisTemplateVar) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Chassis,
			managed: []any{&r.Chassis, &r.Variables, &r.ExternalIDs}}
	},
}

var portGroup = &table[nbdb.PortGroup]{
	name: nbdb.PortGroupTable,
	refs: map[string]func(*nbdb.PortGroup) *[]string{
		nbdb.ACLTable: func(r *nbdb.PortGroup) *[]string { return &r.ACLs },
	},
	row: func(r *nbdb.PortGroup) columns {
		// ports holds weak references to pod ports of other owners; the controller computes
		// the whole set from the cache, so it is managed like any column.
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Ports, &r.ExternalIDs}}
	},
}

var addressSet = &table[nbdb.AddressSet]{
	name: nbdb.AddressSetTable,
	row: func(r *nbdb.AddressSet) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Addresses, &r.ExternalIDs}}
	},
}

var meter = &table[nbdb.Meter]{
	name: nbdb.MeterTable,
	refs: map[string]func(*nbdb.Meter) *[]string{
		nbdb.MeterBandTable: func(r *nbdb.Meter) *[]string { return &r.Bands },
	},
	row: func(r *nbdb.Meter) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Unit, &r.Fair, &r.ExternalIDs}}
	},
}

var logicalSwitchPort = &table[nbdb.LogicalSwitchPort]{
	name:   nbdb.LogicalSwitchPortTable,
	parent: nbdb.LogicalSwitchTable,
	row: func(r *nbdb.LogicalSwitchPort) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.Type, &r.Addresses, &r.PortSecurity, &r.Options, &r.ExternalIDs}}
	},
}

var logicalRouterPort = &table[nbdb.LogicalRouterPort]{
	name:   nbdb.LogicalRouterPortTable,
	parent: nbdb.LogicalRouterTable,
	row: func(r *nbdb.LogicalRouterPort) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Name,
			managed: []any{&r.Name, &r.MAC, &r.Networks, &r.Options, &r.ExternalIDs}}
	},
}

var staticRoute = &table[nbdb.LogicalRouterStaticRoute]{
	name:   nbdb.LogicalRouterStaticRouteTable,
	parent: nbdb.LogicalRouterTable,
	row: func(r *nbdb.LogicalRouterStaticRoute) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.IPPrefix + " via " + r.Nexthop,
			managed: []any{&r.IPPrefix, &r.Nexthop, &r.Policy, &r.OutputPort, &r.ExternalIDs}}
	},
}

var routerPolicy = &table[nbdb.LogicalRouterPolicy]{
	name:   nbdb.LogicalRouterPolicyTable,
	parent: nbdb.LogicalRouterTable,
	row: func(r *nbdb.LogicalRouterPolicy) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Match,
			managed: []any{&r.Priority, &r.Match, &r.Action, &r.Nexthops, &r.ExternalIDs}}
	},
}

var nat = &table[nbdb.NAT]{
	name:   nbdb.NATTable,
	parent: nbdb.LogicalRouterTable,
	row: func(r *nbdb.NAT) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Type + " " + r.LogicalIP + " to " + r.ExternalIP,
			managed: []any{&r.Type, &r.ExternalIP, &r.LogicalIP, &r.ExternalIDs}}
	},
}

// ACLs hang on port groups (Port_Group.acls), not on switches: a policy's on its own, the
// cluster-wide ones on the group of every node switch (role NodeSwitches).
var acl = &table[nbdb.ACL]{
	name:   nbdb.ACLTable,
	parent: nbdb.PortGroupTable,
	row: func(r *nbdb.ACL) columns {
		label := ""
		if r.Name != nil {
			label = *r.Name
		}
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: label,
			managed: []any{&r.Name, &r.Direction, &r.Priority, &r.Match, &r.Action, &r.Log, &r.Severity,
				&r.Meter, &r.Options, &r.ExternalIDs}}
	},
}

var meterBand = &table[nbdb.MeterBand]{
	name:   nbdb.MeterBandTable,
	parent: nbdb.MeterTable,
	row: func(r *nbdb.MeterBand) columns {
		return columns{uuid: &r.UUID, ids: &r.ExternalIDs, label: r.Action,
			managed: []any{&r.Action, &r.Rate, &r.BurstSize, &r.ExternalIDs}}
	},
}
