package controller

import (
	"context"
	"net/netip"
	"testing"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// testConfig is the controllers' configuration in tests. No periodic resync: every
// convergence comes from events, start-up and reconnection.
func testConfig(cluster string) Config {
	return Config{ClusterCIDR: netip.MustParsePrefix(cluster), NodeSubnetBits: 24,
		JoinSubnet: netip.MustParsePrefix("100.64.0.0/16"), Workers: 4}
}

// rowsView is an nbView over fixed rows.
type rowsView []model.Model

func (v rowsView) Owned(_ context.Context, k nb.Key) ([]model.Model, error) {
	var out []model.Model
	for _, m := range v {
		if key, ours := nb.OwnerOf(m); ours && key == k {
			out = append(out, m)
		}
	}
	return out, nil
}

func (v rowsView) Referrers(context.Context, string, string) ([]model.Model, error) { return nil, nil }
func (v rowsView) All(context.Context) ([]model.Model, error)                       { return v, nil }

func annotatedPod(name, node, ip string, phase corev1.PodPhase) *corev1.Pod {
	subnet := netip.MustParsePrefix(ip + "/24").Masked()
	v, _ := topology.PodNetwork(subnet, netip.MustParseAddr(ip)).Marshal()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{contract.PodNetworkKey: v}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// TestRebuildBeforeAllocating checks that a starting master knows, before it allocates
// anything, every subnet and address the cluster's annotations and the NB record.
func TestRebuildBeforeAllocating(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Annotations: map[string]string{contract.NodeSubnetKey: "10.244.5.0/24"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}}, // its NB switch remembers its subnet
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node3"}},
		annotatedPod("running", "node1", "10.244.5.3", corev1.PodRunning),
		annotatedPod("done", "node1", "10.244.5.4", corev1.PodSucceeded),
		annotatedPod("pending", "node1", "10.244.5.5", corev1.PodPending),
		annotatedPod("elsewhere", "node2", "10.244.5.6", corev1.PodRunning), // not node2's subnet
	}
	c, err := New(testConfig("10.244.0.0/16"), fake.NewClientset(objs...), nil, record.NewFakeRecorder(10), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	c.view = rowsView{
		&nbdb.LogicalSwitch{UUID: "u1", Name: "node2", OtherConfig: map[string]string{"subnet": "10.244.7.0/24"},
			ExternalIDs: nb.NewID(nb.Node, "node2", nb.NodeSwitch).ExternalIDs()},
		&nbdb.LogicalRouterPort{UUID: "u2", Name: "rtoj-GR_node1", Networks: []string{"100.64.0.7/16"},
			ExternalIDs: nb.NewID(nb.Node, "node1", nb.GatewayJoinPort).ExternalIDs()},
	}
	c.factory.Start(ctx.Done())
	defer func() { cancel(); c.factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if err := c.rebuild(ctx); err != nil {
		t.Fatal(err)
	}

	for node, want := range map[string]string{"node1": "10.244.5.0/24", "node2": "10.244.7.0/24"} {
		if got, ok := c.ipam.NodeSubnet(node); !ok || got.String() != want {
			t.Errorf("%s: subnet %v, want %s", node, got, want)
		}
	}
	if _, ok := c.ipam.NodeSubnet("node3"); ok {
		t.Error("node3 got a subnet from nowhere")
	}
	if got, _ := c.ipam.AllocatePodIP("node1", "ns/new"); got.String() != "10.244.5.4" {
		t.Errorf("new pod got %s, want 10.244.5.4: .3 and .5 are held, the Succeeded pod's .4 is free", got)
	}
	if got, ok := c.ipam.JoinIP("node1"); !ok || got.String() != "100.64.0.7" {
		t.Errorf("node1 join IP %v", got)
	}
	if got, _ := c.ipam.AllocateNodeSubnet("node3"); got.String() != "10.244.0.0/24" {
		t.Errorf("node3 got %s", got)
	}
}

// TestRebuildSubnetClaimedByTwoNodes (security audit H4): a node agent that rewrote its
// Node's subnet annotation to another node's subnet does not get it at the next master
// start (where the first name used to win): each node gets the subnet its NB switch has.
func TestRebuildSubnetClaimedByTwoNodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	annotated := func(name, subnet string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{contract.NodeSubnetKey: subnet}}}
	}
	objs := []runtime.Object{
		annotated("a-forger", "10.244.7.0/24"), // sorts first; its switch has 10.244.3.0/24
		annotated("b", "10.244.7.0/24"),
	}
	c, err := New(testConfig("10.244.0.0/16"), fake.NewClientset(objs...), nil, record.NewFakeRecorder(10), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	sw := func(node, subnet string) *nbdb.LogicalSwitch {
		return &nbdb.LogicalSwitch{UUID: "u-" + node, Name: node, OtherConfig: map[string]string{"subnet": subnet},
			ExternalIDs: nb.NewID(nb.Node, node, nb.NodeSwitch).ExternalIDs()}
	}
	c.view = rowsView{sw("a-forger", "10.244.3.0/24"), sw("b", "10.244.7.0/24")}
	c.factory.Start(ctx.Done())
	defer func() { cancel(); c.factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if err := c.rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"a-forger": "10.244.3.0/24", "b": "10.244.7.0/24"} {
		if got, ok := c.ipam.NodeSubnet(node); !ok || got.String() != want {
			t.Errorf("%s: subnet %v (held %v), want %s, its NB switch's", node, got, ok, want)
		}
	}
}

// TestRebuildKeepsOrphanPortAddresses: a pod deleted (or finished) while no master ran still
// has its port in NB; its address stays taken until that port is deleted, so a new pod can
// never share a MAC and IP with a port that still exists.
func TestRebuildKeepsOrphanPortAddresses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Annotations: map[string]string{contract.NodeSubnetKey: "10.244.5.0/24"}}},
		annotatedPod("done", "node1", "10.244.5.4", corev1.PodSucceeded),
	}
	c, err := New(testConfig("10.244.0.0/16"), fake.NewClientset(objs...), nil, record.NewFakeRecorder(10), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	port := func(key, addr string) *nbdb.LogicalSwitchPort {
		return &nbdb.LogicalSwitchPort{UUID: "u-" + key, Name: key, Addresses: []string{addr},
			ExternalIDs: nb.NewID(nb.Pod, key, nb.PodPort).ExternalIDs()}
	}
	c.view = rowsView{
		port("ns/gone", "0a:58:0a:f4:05:03 10.244.5.3"), // pod deleted while the master was down
		port("ns/done", "0a:58:0a:f4:05:04 10.244.5.4"), // pod finished, port not removed yet
		port("ns/far", "0a:58:0a:f4:09:03 10.244.9.3"),  // on no known node: nothing to reserve
	}
	c.factory.Start(ctx.Done())
	defer func() { cancel(); c.factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if err := c.rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ipam.AllocatePodIP("node1", "ns/new"); got.String() != "10.244.5.5" {
		t.Errorf("new pod got %s, want 10.244.5.5: .3 and .4 still have ports", got)
	}
	if ip, ok := c.ipam.ReleasePod("ns/gone"); !ok || ip.String() != "10.244.5.3" {
		t.Errorf("releasing the orphan's address: %v %v", ip, ok)
	}
	if got, _ := c.ipam.AllocatePodIP("node1", "ns/next"); got.String() != "10.244.5.3" {
		t.Errorf("after the orphan's port is gone its address is free again; got %s", got)
	}
}
