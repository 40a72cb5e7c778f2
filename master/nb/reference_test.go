package nb

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

var web = Key{Kind: Service, Name: "ns/web"}

const (
	lbgUUID = "00000000-0000-0000-0000-0000000000a1"
	gr1UUID = "00000000-0000-0000-0000-0000000000b1"
	gr2UUID = "00000000-0000-0000-0000-0000000000b2"
	lbUUID  = "00000000-0000-0000-0000-0000000000d1"
)

func lbID(role Role, scope string) ID {
	return NewID(Service, "ns/web", role).WithScope(scope)
}

func lbRow(role Role, scope string, refs ...ID) Row {
	tcp := nbdb.LoadBalancerProtocolTCP
	return Row{ID: lbID(role, scope), ReferencedBy: refs, Model: &nbdb.LoadBalancer{Name: "Service_ns/web_TCP_" + scope,
		Protocol: &tcp, Vips: map[string]string{"10.96.0.10:80": "10.244.1.10:8080"}}}
}

var clusterLBG = NewID(Cluster, ClusterName, ClusterLBGroup)

func gr(node string) ID { return NewID(Node, node, GatewayRouter) }

// lbWorld is the cluster LB group and two gateway routers; lbs referenced as given.
func lbWorld(lbgRefs, gr1Refs, gr2Refs []string, rows ...Row) fakeView {
	v := fakeView{
		&nbdb.LoadBalancerGroup{UUID: lbgUUID, Name: ClusterLBGroupName, LoadBalancer: lbgRefs},
		&nbdb.LogicalRouter{UUID: gr1UUID, Name: "GR_node1", LoadBalancer: gr1Refs, ExternalIDs: ids(gr("node1"))},
		&nbdb.LogicalRouter{UUID: gr2UUID, Name: "GR_node2", LoadBalancer: gr2Refs, ExternalIDs: ids(gr("node2"))},
	}
	for _, r := range rows {
		m := r.Model.(*nbdb.LoadBalancer).DeepCopy()
		m.UUID = lbUUID
		m.ExternalIDs = ids(r.ID)
		v = append(v, m)
	}
	return v
}

func TestDiffNewRootIsLinkedToItsReferrers(t *testing.T) {
	r := lbRow(ServiceClusterLB, "tcp", clusterLBG)
	p, err := Diff(context.Background(), lbWorld(nil, nil, nil), web, []Row{r})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Create) != 1 || len(p.Link) != 1 || len(p.Unlink)+len(p.Update)+len(p.Delete) != 0 {
		t.Fatalf("plan %s", p)
	}
	want := Link{ParentTable: nbdb.LoadBalancerGroupTable, ParentUUID: lbgUUID, ParentName: ClusterLBGroupName,
		ChildTable: nbdb.LoadBalancerTable, Child: p.Create[0].(*nbdb.LoadBalancer).UUID}
	if p.Link[0] != want {
		t.Errorf("link %+v, want %+v", p.Link[0], want)
	}
}

func TestDiffRootMovesBetweenReferrers(t *testing.T) {
	old := lbRow(ServiceNodeRouterLB, "tcp/node1", gr("node1"))
	// Someone put the LB in the group as well; now it must hang on GR_node2 only.
	v := lbWorld([]string{lbUUID}, []string{lbUUID}, nil, old)
	r := lbRow(ServiceNodeRouterLB, "tcp/node1", gr("node2"))
	p, err := Diff(context.Background(), v, web, []Row{r})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Create)+len(p.Update)+len(p.Delete) != 0 || len(p.Link) != 1 || len(p.Unlink) != 2 {
		t.Fatalf("plan %s", p)
	}
	if p.Link[0].ParentUUID != gr2UUID || p.Link[0].Child != lbUUID {
		t.Errorf("link %+v", p.Link[0])
	}
	var unlinked []string
	for _, l := range p.Unlink {
		unlinked = append(unlinked, l.ParentUUID)
	}
	slices.Sort(unlinked)
	if !slices.Equal(unlinked, []string{lbgUUID, gr1UUID}) {
		t.Errorf("unlinked from %v", unlinked)
	}
}

func TestDiffReferencedRootConverged(t *testing.T) {
	r := lbRow(ServiceClusterLB, "tcp", clusterLBG)
	p, err := Diff(context.Background(), lbWorld([]string{lbUUID}, nil, nil, r), web, []Row{r})
	if err != nil || !p.Empty() {
		t.Fatalf("plan %v, %v; want nothing to do", p, err)
	}
	// Deleting the Service deletes the LB; OVSDB drops the weak references with it.
	p, err = Diff(context.Background(), lbWorld([]string{lbUUID}, nil, nil, r), web, nil)
	if err != nil || len(p.Delete) != 1 || len(p.Unlink) != 0 {
		t.Fatalf("plan %v, %v; want one delete", p, err)
	}
}

func TestDiffMissingReferrer(t *testing.T) {
	r := lbRow(ServiceNodeRouterLB, "tcp/node3", gr("node3"))
	_, err := Diff(context.Background(), lbWorld(nil, nil, nil), web, []Row{r})
	var missing *MissingParentError
	if !errors.As(err, &missing) || missing.Parent != gr("node3") {
		t.Fatalf("err %v, want a missing GR_node3", err)
	}
}

func TestDiffRejectsBadReferrers(t *testing.T) {
	for name, rows := range map[string][]Row{
		"a switch has no referrers": {{ID: NewID(Node, "node1", NodeSwitch), Model: &nbdb.LogicalSwitch{Name: "node1"},
			ReferencedBy: []ID{gr("node1")}}},
		"a port cannot reference an LB": {lbRow(ServiceClusterLB, "tcp", NewID(Node, "node1", ManagementPort))},
		"unscoped LB":                   {{ID: NewID(Service, "ns/web", ServiceClusterLB), Model: &nbdb.LoadBalancer{}}},
	} {
		scope := web
		if name == "a switch has no referrers" {
			scope = node1
		}
		if _, err := Diff(context.Background(), lbWorld(nil, nil, nil), scope, rows); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestMergeRenamesNamedUUIDsApart(t *testing.T) {
	var plans []*Plan
	for _, name := range []string{"ns/a", "ns/b"} {
		tcp := nbdb.LoadBalancerProtocolTCP
		r := Row{ID: NewID(Service, name, ServiceClusterLB).WithScope("tcp"), ReferencedBy: []ID{clusterLBG},
			Model: &nbdb.LoadBalancer{Name: "Service_" + name + "_TCP_cluster", Protocol: &tcp}}
		p, err := Diff(context.Background(), lbWorld(nil, nil, nil), r.ID.Key, []Row{r})
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	m := Merge(plans...)
	a, b := m.Create[0].(*nbdb.LoadBalancer).UUID, m.Create[1].(*nbdb.LoadBalancer).UUID
	if a == b || len(m.Link) != 2 || m.Link[0].Child != a || m.Link[1].Child != b {
		t.Errorf("uuids %s %s, links %+v", a, b, m.Link)
	}
}

// Merge renames the named UUIDs of copies: the plans it merges stay as Diff made them, so a
// caller may merge them again, or apply one alone, and get the same operations.
func TestMergeLeavesItsPlansAlone(t *testing.T) {
	ctx := context.Background()
	node, err := Diff(ctx, fakeView{clusterRouter()}, node1, nodeRows("10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := Diff(ctx, lbWorld(nil, nil, nil), web, []Row{lbRow(ServiceClusterLB, "tcp", clusterLBG)})
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func(p *Plan) Plan {
		c := *p
		c.Create = nil
		for _, m := range p.Create {
			c.Create = append(c.Create, model.Clone(m))
		}
		c.Link = slices.Clone(p.Link)
		return c
	}
	before := []Plan{snapshot(node), snapshot(lb)}
	m := Merge(node, lb)
	for i, p := range []*Plan{node, lb} {
		if !reflect.DeepEqual(*p, before[i]) {
			t.Errorf("plan %d changed by Merge:\n%+v\nwas\n%+v", i, *p, before[i])
		}
	}
	if again := Merge(node, lb); !reflect.DeepEqual(again, m) {
		t.Errorf("merging twice differs:\n%+v\n%+v", again, m)
	}

	// The merged plan is consistent: every named UUID distinct, the new switch references
	// its new port by the port's new name, and every link names a created row.
	created := map[string]bool{}
	var sw *nbdb.LogicalSwitch
	var port *nbdb.LogicalSwitchPort
	for _, c := range m.Create {
		a, _ := access(c)
		if created[*a.uuid] || !strings.HasPrefix(*a.uuid, "new_") {
			t.Errorf("named UUID %q repeated or not named", *a.uuid)
		}
		created[*a.uuid] = true
		switch r := c.(type) {
		case *nbdb.LogicalSwitch:
			sw = r
		case *nbdb.LogicalSwitchPort:
			port = r
		}
	}
	if sw == nil || port == nil || !slices.Equal(sw.Ports, []string{port.UUID}) {
		t.Errorf("merged switch %+v, port %+v", sw, port)
	}
	for _, l := range m.Link {
		if !created[l.Child] {
			t.Errorf("link %+v names no created row", l)
		}
	}
}

// Diff is a function of the view and the desired rows: the same inputs give the same plan,
// named UUIDs included (they are unique within a plan; Merge renames plans apart).
func TestDiffIsAFunction(t *testing.T) {
	ctx := context.Background()
	a, err := Diff(ctx, fakeView{clusterRouter()}, node1, nodeRows("10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Diff(ctx, fakeView{clusterRouter()}, node1, nodeRows("10.244.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two diffs of the same rows:\n%+v\n%+v", a, b)
	}
}

// Every table that references the master's rows, as a parent or a referrer, can be searched
// for referrers: a missing lookup would leave stale references behind unnoticed.
func TestEveryReferrerTableHasALookup(t *testing.T) {
	for _, child := range TableNames() {
		info := infoOf(child)
		from := info.referrers
		if !info.root {
			from = []string{info.parent}
		}
		for _, table := range from {
			if _, err := refPredicate(table, child, "u"); err != nil {
				t.Errorf("%s rows referenced from %s: %v", child, table, err)
			}
		}
	}
}
