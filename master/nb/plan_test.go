package nb

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// fakeView is a View over a fixed set of rows.
type fakeView []model.Model

func (f fakeView) Owned(_ context.Context, k Key) ([]model.Model, error) {
	var out []model.Model
	for _, m := range f {
		a, _ := access(m)
		if (*a.ids)[KindKey] == string(k.Kind) && (*a.ids)[NameKey] == k.Name {
			out = append(out, model.Clone(m))
		}
	}
	return out, nil
}

func (f fakeView) Referrers(_ context.Context, childTable, uuid string) ([]model.Model, error) {
	var out []model.Model
	for _, m := range f {
		if ref, err := refColumn(m, childTable); err == nil && slices.Contains(*ref, uuid) {
			out = append(out, model.Clone(m))
		}
	}
	return out, nil
}

var node1 = Key{Kind: Node, Name: "node1"}

func ids(id ID, extra ...string) map[string]string {
	m := id.ExternalIDs()
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func nodeID(r Role) ID    { return NewID(Node, "node1", r) }
func clusterID(r Role) ID { return NewID(Cluster, ClusterName, r) }

// nodeRows are a node switch with a management port and a route on the cluster router.
func nodeRows(subnet string) []Row {
	return []Row{
		{ID: nodeID(NodeSwitch), Model: &nbdb.LogicalSwitch{Name: "node1", OtherConfig: map[string]string{"subnet": subnet}}},
		{ID: nodeID(ManagementPort), Model: &nbdb.LogicalSwitchPort{Name: "k8s-node1", Addresses: []string{"0a:58:0a:f4:01:02 10.244.1.2"}},
			Parent: nodeID(NodeSwitch)},
		{ID: nodeID(NodeSubnetRoute), Model: &nbdb.LogicalRouterStaticRoute{IPPrefix: subnet, Nexthop: "100.64.0.2"},
			Parent: clusterID(ClusterRouter)},
	}
}

const clusterRouterUUID = "00000000-0000-0000-0000-0000000000c1"

func clusterRouter(routes ...string) *nbdb.LogicalRouter {
	return &nbdb.LogicalRouter{UUID: clusterRouterUUID, Name: "ovn_cluster_router", StaticRoutes: routes,
		ExternalIDs: ids(clusterID(ClusterRouter))}
}

func TestDiffCreatesChildrenWithTheirParents(t *testing.T) {
	p, err := Diff(context.Background(), fakeView{clusterRouter()}, node1, nodeRows("10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Create) != 3 || len(p.Update)+len(p.Unlink)+len(p.Delete) != 0 {
		t.Fatalf("plan %s", p)
	}
	// Non-root rows first; the new switch references its new port by named UUID.
	ls, ok := p.Create[2].(*nbdb.LogicalSwitch)
	if !ok {
		t.Fatalf("last insert is %T, want the switch", p.Create[2])
	}
	port := p.Create[0].(*nbdb.LogicalSwitchPort)
	if !slices.Equal(ls.Ports, []string{port.UUID}) || !strings.HasPrefix(port.UUID, "new_") {
		t.Errorf("switch ports %v, port uuid %q", ls.Ports, port.UUID)
	}
	if !maps.Equal(ls.ExternalIDs, ids(nodeID(NodeSwitch))) {
		t.Errorf("switch marks %v", ls.ExternalIDs)
	}
	// The route hangs on the cluster router, which exists: a mutation adds it.
	want := Link{ParentTable: nbdb.LogicalRouterTable, ParentUUID: clusterRouterUUID, ParentName: "ovn_cluster_router",
		ChildTable: nbdb.LogicalRouterStaticRouteTable, Child: p.Create[1].(*nbdb.LogicalRouterStaticRoute).UUID}
	if len(p.Link) != 1 || p.Link[0] != want {
		t.Errorf("links %+v, want %+v", p.Link, want)
	}
	if !slices.Contains(p.Created, nodeID(NodeSwitch)) {
		t.Errorf("Created %v", p.Created)
	}
}

// converged is what the NB holds once nodeRows("10.244.1.0/24") was applied.
func converged() fakeView {
	return fakeView{
		clusterRouter("00000000-0000-0000-0000-000000000003"),
		&nbdb.LogicalSwitch{UUID: "00000000-0000-0000-0000-000000000001", Name: "node1",
			OtherConfig: map[string]string{"subnet": "10.244.1.0/24"}, Ports: []string{"00000000-0000-0000-0000-000000000002"},
			ExternalIDs: ids(nodeID(NodeSwitch))},
		&nbdb.LogicalSwitchPort{UUID: "00000000-0000-0000-0000-000000000002", Name: "k8s-node1",
			Addresses: []string{"0a:58:0a:f4:01:02 10.244.1.2"}, ExternalIDs: ids(nodeID(ManagementPort))},
		&nbdb.LogicalRouterStaticRoute{UUID: "00000000-0000-0000-0000-000000000003", IPPrefix: "10.244.1.0/24", Nexthop: "100.64.0.2",
			ExternalIDs: ids(nodeID(NodeSubnetRoute))},
	}
}

func TestDiffConvergedIsEmpty(t *testing.T) {
	p, err := Diff(context.Background(), converged(), node1, nodeRows("10.244.1.0/24"))
	if err != nil || !p.Empty() {
		t.Fatalf("plan %v, %v; want nothing to do", p, err)
	}
}

func TestDiffUpdatesChangedColumnsOnly(t *testing.T) {
	p, err := Diff(context.Background(), converged(), node1, nodeRows("10.244.9.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Create)+len(p.Link)+len(p.Unlink)+len(p.Delete) != 0 || len(p.Update) != 2 {
		t.Fatalf("plan %s, want two updates", p)
	}
	ls := p.Update[0].Row.(*nbdb.LogicalSwitch)
	if ls.UUID != "00000000-0000-0000-0000-000000000001" || len(p.Update[0].Fields) != 1 || p.Update[0].Fields[0] != &ls.OtherConfig {
		t.Errorf("switch update %+v", p.Update[0])
	}
	route := p.Update[1].Row.(*nbdb.LogicalRouterStaticRoute)
	if len(p.Update[1].Fields) != 1 || p.Update[1].Fields[0] != &route.IPPrefix {
		t.Errorf("route update %+v", p.Update[1])
	}
}

func TestDiffRemovesStaleAndDuplicateRows(t *testing.T) {
	v := converged()
	dup := &nbdb.LogicalSwitch{UUID: "00000000-0000-0000-0000-000000000000", Name: "node1-copy",
		ExternalIDs: ids(nodeID(NodeSwitch)), Ports: []string{"00000000-0000-0000-0000-000000000005"}}
	bogus := &nbdb.LogicalSwitchPort{UUID: "00000000-0000-0000-0000-000000000005", Name: "old",
		ExternalIDs: ids(nodeID("no-such-role"))}
	notOurs := &nbdb.LogicalSwitch{UUID: "00000000-0000-0000-0000-000000000006", Name: "node1",
		ExternalIDs: map[string]string{NameKey: "node1"}}
	v = append(v, dup, bogus, notOurs)
	v[1].(*nbdb.LogicalSwitch).Ports = append(v[1].(*nbdb.LogicalSwitch).Ports, bogus.UUID)

	// Drop the management port from the desired rows: its row is stale too.
	p, err := Diff(context.Background(), v, node1, slices.Delete(nodeRows("10.244.1.0/24"), 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	// The copy has the lower UUID but not the desired name: the original stays.
	if len(p.Delete) != 1 || p.Delete[0].(*nbdb.LogicalSwitch).UUID != dup.UUID {
		t.Errorf("deletes %v, want only the duplicate switch", p.Delete)
	}
	var unlinked []string
	for _, l := range p.Unlink {
		if l.ParentUUID == dup.UUID {
			t.Errorf("unlink from the deleted duplicate: %+v", l)
		}
		unlinked = append(unlinked, l.Child)
	}
	slices.Sort(unlinked)
	if want := []string{"00000000-0000-0000-0000-000000000002", bogus.UUID}; !slices.Equal(unlinked, want) {
		t.Errorf("unlinked %v, want the management port and the bogus port", unlinked)
	}
}

func TestDiffMovesAnExistingChild(t *testing.T) {
	podKey := Key{Kind: Pod, Name: "ns/p"}
	podID := NewID(Pod, "ns/p", PodPort)
	sw := func(uuid, node string, ports ...string) *nbdb.LogicalSwitch {
		return &nbdb.LogicalSwitch{UUID: uuid, Name: node, Ports: ports,
			ExternalIDs: ids(NewID(Node, node, NodeSwitch))}
	}
	port := &nbdb.LogicalSwitchPort{UUID: "00000000-0000-0000-0000-0000000000a1", Name: "ns_p",
		Addresses: []string{"0a:58:0a:f4:01:05 10.244.1.5"}, ExternalIDs: ids(podID)}
	v := fakeView{sw("00000000-0000-0000-0000-0000000000b1", "node1", port.UUID), sw("00000000-0000-0000-0000-0000000000b2", "node2"), port}
	desired := []Row{{ID: podID, Parent: NewID(Node, "node2", NodeSwitch),
		Model: &nbdb.LogicalSwitchPort{Name: "ns_p", Addresses: []string{"0a:58:0a:f4:02:05 10.244.2.5"}}}}
	p, err := Diff(context.Background(), v, podKey, desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Update) != 1 || len(p.Link) != 1 || p.Link[0].ParentName != "node2" || len(p.Unlink) != 1 || p.Unlink[0].ParentName != "node1" {
		t.Errorf("plan %s: links %+v unlinks %+v", p, p.Link, p.Unlink)
	}

	// Without node2's switch, the pod waits.
	_, err = Diff(context.Background(), v[:1], podKey, desired)
	var missing *MissingParentError
	if !errors.As(err, &missing) || missing.Parent.Name != "node2" {
		t.Errorf("got %v, want a MissingParentError for node2's switch", err)
	}
}

func TestDiffRejectsInvalidRows(t *testing.T) {
	ls := func() model.Model { return &nbdb.LogicalSwitch{Name: "x"} }
	for name, rows := range map[string][]Row{
		"role of another kind": {{ID: nodeID(ClusterRouter), Model: &nbdb.LogicalRouter{}}},
		"row of another owner": {{ID: NewID(Node, "node2", NodeSwitch), Model: ls()}},
		"wrong table":          {{ID: nodeID(NodeSwitch), Model: &nbdb.LogicalRouter{}}},
		"root with a parent":   {{ID: nodeID(NodeSwitch), Model: ls(), Parent: clusterID(ClusterRouter)}},
		"port without parent":  {{ID: nodeID(ManagementPort), Model: &nbdb.LogicalSwitchPort{}}},
		"parent of wrong table": {{ID: nodeID(ManagementPort), Model: &nbdb.LogicalSwitchPort{},
			Parent: clusterID(ClusterRouter)}},
		"twice": {{ID: nodeID(NodeSwitch), Model: ls()}, {ID: nodeID(NodeSwitch), Model: ls()}},
	} {
		if _, err := Diff(context.Background(), fakeView{}, node1, rows); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestManagedEqualIgnoresReferences(t *testing.T) {
	a := &nbdb.LogicalSwitch{Name: "n", Ports: []string{"x"}, OtherConfig: map[string]string{}}
	b := &nbdb.LogicalSwitch{Name: "n", Ports: []string{"x", "y"}}
	if !ManagedEqual(a, b) {
		t.Error("a new port (or an empty map vs none) counted as a change")
	}
	c := &nbdb.LogicalSwitchPort{Addresses: []string{"a", "b"}}
	d := &nbdb.LogicalSwitchPort{Addresses: []string{"b", "a"}}
	if !ManagedEqual(c, d) {
		t.Error("set order counted as a change")
	}
	b.OtherConfig = map[string]string{"subnet": "10.0.0.0/24"}
	if ManagedEqual(a, b) {
		t.Error("other_config change not seen")
	}
	if !sameValue(new(*string), new(*string)) {
		t.Error("nil optional columns differ")
	}
}
