package nb

import (
	"maps"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

func TestExternalIDsRoundTrip(t *testing.T) {
	id := NewID(Pod, "ns/web", PodPort)
	got, ours, err := FromExternalIDs(id.ExternalIDs())
	if !ours || err != nil || got != id {
		t.Errorf("round trip: %v, %v, %v", got, ours, err)
	}
	want := map[string]string{
		"k8s.ovn-transparent.io/owner-kind": "Pod",
		"k8s.ovn-transparent.io/owner":      "ns/web",
		"k8s.ovn-transparent.io/role":       "pod-port",
	}
	if !maps.Equal(id.ExternalIDs(), want) {
		t.Errorf("marks %v", id.ExternalIDs())
	}
	if id.Table() != nbdb.LogicalSwitchPortTable {
		t.Errorf("table %q", id.Table())
	}
}

func TestFromExternalIDs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      map[string]string
		ours, ok bool
	}{
		{"someone else's", map[string]string{"k8s.ovn.org/owner": "x"}, false, true},
		{"no marks", nil, false, true},
		{"unknown role", map[string]string{KindKey: "Node", NameKey: "n", RoleKey: "bogus"}, true, false},
		{"role of another kind", map[string]string{KindKey: "Pod", NameKey: "n", RoleKey: string(NodeSwitch)}, true, false},
		{"no owner", map[string]string{KindKey: "Node", RoleKey: string(NodeSwitch)}, true, false},
		{"good", NewID(Cluster, ClusterName, JoinSwitch).ExternalIDs(), true, true},
	} {
		_, ours, err := FromExternalIDs(tc.ids)
		if ours != tc.ours || (err == nil) != tc.ok {
			t.Errorf("%s: ours=%v err=%v", tc.name, ours, err)
		}
	}
}

func TestRoles(t *testing.T) {
	n := 0
	for _, kind := range []Kind{Cluster, Node, Pod, Service, NetworkPolicy, NetworkPolicyPeer} {
		for _, r := range Roles(kind) {
			n++
			id := NewID(kind, "x", r)
			if roles[r].scoped {
				if id.Validate() == nil {
					t.Errorf("scoped role %s valid without a scope", r)
				}
				id = id.WithScope("tcp")
			}
			if err := id.Validate(); err != nil {
				t.Error(err)
			}
			if NewModel(id.Table()) == nil {
				t.Errorf("role %s in unknown table %q", r, id.Table())
			}
			back, ours, err := FromExternalIDs(id.ExternalIDs())
			if !ours || err != nil || back != id {
				t.Errorf("%s: marks read back as %s (%v)", id, back, err)
			}
		}
	}
	if NewID(Pod, "x", PodPort).WithScope("r").Validate() == nil {
		t.Error("a scope on a role that is not scoped is valid")
	}
	if n != len(roles) {
		t.Errorf("%d roles reachable from the kinds, %d registered", n, len(roles))
	}
	if (Key{Kind: "Ingress", Name: "x"}).Known() {
		t.Error("a kind without a controller is Known")
	}
}

func TestScopedIDs(t *testing.T) {
	id := NewID(Service, "ns/web", ServiceNodeRouterLB).WithScope("tcp/node1")
	got, ours, err := FromExternalIDs(id.ExternalIDs())
	if !ours || err != nil || got != id {
		t.Errorf("round trip: %v, %v, %v", got, ours, err)
	}
	if err := NewID(Service, "ns/web", ServiceClusterLB).Validate(); err == nil {
		t.Error("a scoped role without a scope validates")
	}
	if err := NewID(Node, "n", NodeSwitch).WithScope("x").Validate(); err == nil {
		t.Error("an unscoped role with a scope validates")
	}
	if id, ok := FromName(nbdb.LoadBalancerGroupTable, ClusterLBGroupName); !ok || id.Validate() != nil || id.Table() != nbdb.LoadBalancerGroupTable {
		t.Errorf("cluster LB group: %v %v", id, ok)
	}
}
