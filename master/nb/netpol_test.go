package nb

import (
	"context"
	"testing"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

var policy = Key{Kind: NetworkPolicy, Name: "ns1/web"}

func aclID(rule string) ID {
	return NewID(NetworkPolicy, "ns1/web", PolicyACL).WithScope(rule)
}

func policyRows(ports []string, matches map[string]string) []Row {
	pg := NewID(NetworkPolicy, "ns1/web", PolicyPods)
	rows := []Row{{ID: pg, Model: &nbdb.PortGroup{Name: "np_x", Ports: ports}}}
	for rule, match := range matches {
		rows = append(rows, Row{ID: aclID(rule), Parent: pg, Model: &nbdb.ACL{
			Direction: nbdb.ACLDirectionToLport, Priority: 1001, Match: match, Action: nbdb.ACLActionAllowRelated}})
	}
	return rows
}

// The ACLs of one policy are rows of one indexed role, told apart by their rule mark: a
// changed match is updated in place, a rule gone is unlinked from the port group, and the
// port group's ports are compared as a set.
func TestDiffPolicyACLsByRule(t *testing.T) {
	ctx := context.Background()
	plan, err := Diff(ctx, fakeView{}, policy, policyRows([]string{"p1"}, map[string]string{"ingress-0": "a", "ingress-1": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Create) != 3 || plan.Create[2].(*nbdb.PortGroup).Name != "np_x" || len(plan.Create[2].(*nbdb.PortGroup).ACLs) != 2 {
		t.Fatalf("first plan %v: %+v", plan, plan.Create)
	}
	pg := &nbdb.PortGroup{UUID: "pg", Name: "np_x", Ports: []string{"p2", "p1"}, ACLs: []string{"a0", "a1"},
		ExternalIDs: ids(NewID(NetworkPolicy, "ns1/web", PolicyPods))}
	acl := func(uuid, rule, match string) *nbdb.ACL {
		return &nbdb.ACL{UUID: uuid, Direction: nbdb.ACLDirectionToLport, Priority: 1001, Match: match,
			Action: nbdb.ACLActionAllowRelated, ExternalIDs: ids(aclID(rule))}
	}
	view := fakeView{pg, acl("a0", "ingress-0", "a"), acl("a1", "ingress-1", "b")}
	plan, err = Diff(ctx, view, policy, policyRows([]string{"p1", "p2"}, map[string]string{"ingress-0": "a", "ingress-1": "b"}))
	if err != nil || !plan.Empty() {
		t.Fatalf("converged: %v %v", plan, err)
	}
	plan, err = Diff(ctx, view, policy, policyRows([]string{"p1"}, map[string]string{"ingress-0": "a2"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Update) != 2 || len(plan.Unlink) != 1 || plan.Unlink[0].Child != "a1" || len(plan.Create) != 0 {
		t.Fatalf("change: %v %+v", plan, plan)
	}
	for _, u := range plan.Update {
		switch r := u.Row.(type) {
		case *nbdb.ACL:
			if r.UUID != "a0" || r.Match != "a2" || len(u.Fields) != 1 {
				t.Errorf("ACL update %+v fields %d", r, len(u.Fields))
			}
		case *nbdb.PortGroup:
			if len(r.Ports) != 1 || len(u.Fields) != 1 {
				t.Errorf("port group update %+v", r)
			}
		}
	}
	plan, err = Diff(ctx, view, policy, nil)
	if err != nil || len(plan.Delete) != 1 || len(plan.Unlink) != 0 {
		t.Fatalf("delete: %v %v", plan, err)
	}
	var _ model.Model = plan.Delete[0].(*nbdb.PortGroup)
}
