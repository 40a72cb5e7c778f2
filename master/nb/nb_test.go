//go:build linux

package nb_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestPlansAgainstARealNB applies plans to a real NB and checks what the database holds:
// a fresh topology, a second diff that finds nothing to do, hand edits put back, duplicates
// and stale rows removed, and other writers' rows left alone.
func TestPlansAgainstARealNB(t *testing.T) {
	harness.Require(t, "ovsdb-server", "ovn-northd", "ovn-nbctl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	central, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(ctx, t, central.NBRemote)
	defer c.Close()
	nbctl := func(args ...string) string {
		t.Helper()
		out, err := central.NBCtl(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	cfg := topology.Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), JoinSubnet: netip.MustParsePrefix("100.64.0.0/16")}
	gw, err := topology.GatewayFrom(contract.NodeChassisInfo{ChassisID: "ch1", NodeIP: "172.18.0.1/24",
		GatewayMAC: "0a:58:ac:12:00:01", NextHop: "172.18.0.254"}, netip.MustParseAddr("100.64.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	nodeRows, err := topology.NodeRows(cfg, topology.Node{Name: "node1", Subnet: netip.MustParsePrefix("10.244.1.0/24"), Gateway: gw})
	if err != nil {
		t.Fatal(err)
	}
	clusterKey := nb.Key{Kind: nb.Cluster, Name: nb.ClusterName}
	nodeKey := nb.Key{Kind: nb.Node, Name: "node1"}
	converge := func(key nb.Key, rows []nb.Row) *nb.Plan {
		t.Helper()
		p := apply(ctx, t, c, key, rows)
		if again := apply(ctx, t, c, key, rows); !again.Empty() {
			t.Errorf("%s: second diff not empty: %s", key, again)
		}
		return p
	}

	nbctl("ls-add", "theirs", "--", "lsp-add", "theirs", "their-port")
	converge(clusterKey, topology.Cluster(cfg))
	converge(nodeKey, nodeRows)
	if got := nbctl("--bare", "--columns=options", "list", "logical_router", "GR_node1"); !strings.Contains(got, "chassis=ch1") {
		t.Errorf("GR options %q", got)
	}
	if got := nbctl("lr-route-list", "ovn_cluster_router"); !strings.Contains(got, "10.244.1.0/24") || !strings.Contains(got, "src-ip") {
		t.Errorf("cluster router routes:\n%s", got)
	}

	// Hand edits: a changed subnet, a deleted route, a duplicate switch and a stale port
	// carrying our marks.
	nbctl("set", "logical_switch", "node1", "other_config:subnet=10.244.99.0/24")
	nbctl("lr-route-del", "GR_node1", "0.0.0.0/0")
	nbctl("ls-add", "node1-dup", "--", "set", "logical_switch", "node1-dup",
		"external_ids:k8s.ovn-transparent.io/owner-kind=Node", "external_ids:k8s.ovn-transparent.io/owner=node1",
		"external_ids:k8s.ovn-transparent.io/role=node-switch")
	nbctl("lsp-add", "node1", "stale", "--", "set", "logical_switch_port", "stale",
		"external_ids:k8s.ovn-transparent.io/owner-kind=Node", "external_ids:k8s.ovn-transparent.io/owner=node1",
		"external_ids:k8s.ovn-transparent.io/role=gone")
	waitCached(t, c, "stale")
	p := converge(nodeKey, nodeRows)
	if len(p.Update) != 1 || len(p.Create) != 1 || len(p.Delete) != 1 || len(p.Unlink) != 1 {
		t.Errorf("repair plan %s, want 1 update, 1 create, 1 delete, 1 unlink", p)
	}
	if got := nbctl("get", "logical_switch", "node1", "other_config:subnet"); got != `"10.244.1.0/24"` {
		t.Errorf("subnet %s", got)
	}
	if got := nbctl("--bare", "--columns=name", "find", "logical_switch_port", "name=stale"); got != "" {
		t.Errorf("stale port still there: %q", got)
	}
	if got := nbctl("--bare", "--columns=name", "find", "logical_switch", "name=node1-dup"); got != "" {
		t.Errorf("duplicate switch still there: %q", got)
	}

	// Nothing desired: every row of the node goes, the cluster's and theirs stay.
	converge(nodeKey, nil)
	ls := nbctl("--bare", "--columns=name", "list", "logical_switch")
	lr := nbctl("--bare", "--columns=name", "list", "logical_router")
	if !equalSets(strings.Fields(ls+" "+lr), []string{"join", "theirs", "ovn_cluster_router"}) {
		t.Errorf("left: switches %q, routers %q", ls, lr)
	}
	if got := nbctl("lr-route-list", "ovn_cluster_router"); got != "" {
		t.Errorf("routes of the deleted node left on the cluster router:\n%s", got)
	}
	if got := nbctl("lsp-list", "theirs"); !strings.Contains(got, "their-port") {
		t.Errorf("their port is gone: %q", got)
	}

	// A parent deleted between the diff and the commit: the transaction commits, and
	// CheckApplied says the node's route on it did not land.
	p, err = nb.Diff(ctx, nb.NewCacheView(c), nodeKey, nodeRows)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := p.Ops(c)
	if err != nil {
		t.Fatal(err)
	}
	nbctl("lr-del", "ovn_cluster_router")
	results, err := ovsdb.Transact(ctx, c, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if err := nb.CheckApplied(ops, results); err == nil {
		t.Error("CheckApplied missed links to a deleted router")
	}
}

func connect(ctx context.Context, t *testing.T, remote string) client.Client {
	t.Helper()
	c, err := nb.Connect(ctx, ovsdb.Config{Remotes: remote})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func apply(ctx context.Context, t *testing.T, c client.Client, key nb.Key, rows []nb.Row) *nb.Plan {
	t.Helper()
	p, err := nb.Diff(ctx, nb.NewCacheView(c), key, rows)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := p.Ops(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(ctx, c, ops...); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitCached waits until the client's cache has the port named name (ovn-nbctl wrote it).
func waitCached(t *testing.T, c client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c.Get(context.Background(), &nbdb.LogicalSwitchPort{Name: name}) == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("port %s never reached the cache", name)
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
