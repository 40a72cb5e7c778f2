package controller

// One NetworkPolicy must not stall the master (audit-2 H2): its start-up batch does not hold
// up the pods, its translation stops at the sync deadline, and the peers it stops using go
// even when a transaction failed on the way.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// ingressFrom is a policy of ns1 selecting app=<selects>, allowing ingress from role=<from>.
func ingressFrom(name, selects, from string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": selects}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": from}}}}}},
		},
	}
}

// blockedPolicies is the policy reconciler with every desired state held until release: a
// policy whose translation takes longer than anyone waits, and ignores its context.
type blockedPolicies struct {
	*policyReconciler
	release <-chan struct{}
}

func (b *blockedPolicies) desired(ctx context.Context, key string) (desire, error) {
	<-b.release
	return b.policyReconciler.desired(ctx, key)
}

// replaceKind puts r in place of c's reconciler of r's kind.
func replaceKind(c *Controller, r reconciler) {
	c.byKind[r.kind()] = r
	for i := range c.kinds {
		if c.kinds[i].kind() == r.kind() {
			c.kinds[i] = r
		}
	}
}

// A policy whose start-up translation never ends does not keep pods from their ports, and
// the master stays live meanwhile; once it ends, the policy converges.
func TestUnitPodsGetPortsWhilePolicyBatchBlocked(t *testing.T) {
	e := newUnit(t, testConfig("10.244.0.0/16"), kubetest.Namespace("ns1", nil), kubetest.Node("node1", nil),
		kubetest.Pod("ns1", "web", "node1", map[string]string{"app": "web"}), ingressFrom("huge", "web", "client"))
	release := make(chan struct{})
	e.beforeRun = func(c *Controller) {
		replaceKind(c, &blockedPolicies{policyReconciler: c.byKind[nb.NetworkPolicy].(*policyReconciler), release: release})
	}
	e.startMaster()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	}) // runs before the master stops

	web := waitRow(e, "port of a pod there at start-up", lspNamed(contract.PodPort("ns1", "web")))
	e.create(kubetest.Pod("ns1", "late", "node1", map[string]string{"app": "web"}))
	late := waitRow(e, "port of a pod created after start-up", lspNamed(contract.PodPort("ns1", "late")))
	if err := e.ctrl.Live(); err != nil {
		t.Errorf("liveness while the policy batch runs: %v", err)
	}
	if pgs := unitRows[*nbdb.PortGroup](e); len(pgs) != 0 {
		t.Errorf("port groups %+v before the policy batch has finished", pgs)
	}

	close(release)
	released = true
	pgName := netpol.PortGroupName("ns1/huge")
	want := []string{late.UUID, web.UUID}
	slices.Sort(want)
	kubetest.Eventually(t, "the policy's port group once its batch ends", func() (bool, string) {
		for _, pg := range unitRows[*nbdb.PortGroup](e) {
			got := slices.Sorted(slices.Values(pg.Ports))
			if pg.Name == pgName && slices.Equal(got, want) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", unitRows[*nbdb.PortGroup](e))
	})
}

// addressSets describes sets: their names and addresses.
func addressSets(sets []*nbdb.AddressSet) string {
	var b strings.Builder
	for _, s := range sets {
		fmt.Fprintf(&b, "%s %v; ", s.Name, s.Addresses)
	}
	return fmt.Sprintf("%d sets: %s", len(sets), b.String())
}

// ownedRows returns the rows key owns in the reader's cache.
func ownedRows(e *unitEnv, key nb.Key) []any {
	e.t.Helper()
	rows, err := nb.NewCacheView(e.reader).Owned(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}

// A policy whose translation does not end within the sync deadline fails closed with an
// Event naming it, at start-up and later; the other policy, the peers and the pods are
// served as usual.
func TestUnitPolicyOverDeadlineFailsClosed(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.SyncTimeout = 4 * time.Second // the translation may take half
	e := newUnit(t, cfg, kubetest.Namespace("ns1", nil), kubetest.Node("node1", nil),
		kubetest.Pod("ns1", "web", "node1", map[string]string{"app": "web"}),
		kubetest.Pod("ns1", "db", "node1", map[string]string{"app": "db"}),
		kubetest.Pod("ns1", "client", "node1", map[string]string{"role": "client"}),
		ingressFrom("slow", "web", "client"), ingressFrom("fast", "db", "client"))
	e.beforeRun = func(c *Controller) {
		c.byKind[nb.NetworkPolicy].(*policyReconciler).translatePolicy = func(ctx context.Context, in netpol.Input) (netpol.Output, error) {
			if strings.HasPrefix(in.Policy.Name, "slow") {
				<-ctx.Done() // a translation that would outlast the deadline
				return netpol.Output{}, ctx.Err()
			}
			return translateBounded(ctx, in)
		}
	}
	e.startMaster()

	check := func(t *testing.T, name string, selected *nbdb.LogicalSwitchPort) {
		ev := e.events.WaitEvent(t, "ns1/"+name, ReasonInvalidNetworkPolicy)
		if !strings.Contains(ev.Message, "sync timeout") {
			t.Errorf("event %q does not say the translation ran out of time", ev.Message)
		}
		// Whole state of the policy: its port group with the selected pod, and one ACL,
		// the ingress drop.
		pgName := netpol.PortGroupName("ns1/" + name)
		kubetest.Eventually(t, "the fail-closed rows of ns1/"+name, func() (bool, string) {
			rows := ownedRows(e, nb.Key{Kind: nb.NetworkPolicy, Name: "ns1/" + name})
			var pg *nbdb.PortGroup
			var acls []*nbdb.ACL
			for _, r := range rows {
				switch m := r.(type) {
				case *nbdb.PortGroup:
					pg = m
				case *nbdb.ACL:
					acls = append(acls, m)
				}
			}
			ok := len(rows) == 2 && pg != nil && len(acls) == 1 &&
				pg.Name == pgName && slices.Equal(pg.Ports, []string{selected.UUID}) && slices.Equal(pg.ACLs, []string{acls[0].UUID}) &&
				acls[0].Action == nbdb.ACLActionDrop && acls[0].Direction == nbdb.ACLDirectionToLport &&
				acls[0].Match == "outport == @"+pgName+" && ip"
			return ok, fmt.Sprintf("%d rows: %s", len(rows), describe(rows))
		})
	}
	web := waitRow(e, "web's port", lspNamed(contract.PodPort("ns1", "web")))
	check(t, "slow", web)

	// The other policy is whole: an allow from the client's address set, the only one.
	client := waitRow(e, "client's port", lspNamed(contract.PodPort("ns1", "client")))
	clientIP := strings.Fields(client.Addresses[0])[1]
	kubetest.Eventually(t, "the one address set, with the client", func() (bool, string) {
		sets := unitRows[*nbdb.AddressSet](e)
		return len(sets) == 1 && slices.Equal(sets[0].Addresses, []string{clientIP}), addressSets(sets)
	})
	kubetest.Eventually(t, "fast's allow ACL", func() (bool, string) {
		rows := ownedRows(e, nb.Key{Kind: nb.NetworkPolicy, Name: "ns1/fast"})
		for _, r := range rows {
			if a, ok := r.(*nbdb.ACL); ok && a.Action != nbdb.ACLActionDrop && strings.Contains(a.Match, "$"+unitRows[*nbdb.AddressSet](e)[0].Name) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rows)
	})
	if err := e.ctrl.Live(); err != nil {
		t.Errorf("liveness: %v", err)
	}

	// A policy created later, synced by the work queue, fails closed the same way.
	e.create(ingressFrom("slow-later", "web", "client"))
	check(t, "slow-later", web)
}

// failingNB fails the transactions fail accepts, while armed; it counts the failures.
type failingNB struct {
	client.Client
	armed  atomic.Bool
	failed atomic.Int32
	fail   func([]libovsdb.Operation) bool
}

func (f *failingNB) Transact(ctx context.Context, ops ...libovsdb.Operation) ([]libovsdb.OperationResult, error) {
	if f.armed.Load() && f.fail(ops) && f.armed.CompareAndSwap(true, false) {
		f.failed.Add(1)
		return nil, fmt.Errorf("test: transaction refused")
	}
	return f.Client.Transact(ctx, ops...)
}

// A policy that changes its peer, and whose first transaction fails, lets the old peer's
// address set go once a retry commits: the index follows the committed rows.
func TestUnitPeerReleasedAfterFailedTransaction(t *testing.T) {
	objs := []runtime.Object{kubetest.Namespace("ns1", nil), kubetest.Node("node1", nil),
		kubetest.Pod("ns1", "web", "node1", map[string]string{"app": "web"}),
		kubetest.Pod("ns1", "a", "node1", map[string]string{"role": "a"}),
		kubetest.Pod("ns1", "b", "node1", map[string]string{"role": "b"}),
		ingressFrom("web", "web", "a")}
	e := newUnit(t, testConfig("10.244.0.0/16"), objs...)
	var nbw *failingNB
	e.wrapNB = func(c client.Client) client.Client {
		// The policy's transaction: the one writing its ACL's new match.
		pg := "@" + netpol.PortGroupName("ns1/web")
		nbw = &failingNB{Client: c, fail: func(ops []libovsdb.Operation) bool {
			return slices.ContainsFunc(ops, func(op libovsdb.Operation) bool {
				m, _ := op.Row["match"].(string)
				return op.Table == nbdb.ACLTable && strings.Contains(m, pg)
			})
		}}
		return nbw
	}
	e.startMaster()
	ipOf := func(pod string) string {
		lsp := waitRow(e, "port of "+pod, lspNamed(contract.PodPort("ns1", pod)))
		return strings.Fields(lsp.Addresses[0])[1]
	}
	onlySet := func(addr string) {
		t.Helper()
		kubetest.Eventually(t, "exactly one address set, with "+addr, func() (bool, string) {
			sets := unitRows[*nbdb.AddressSet](e)
			return len(sets) == 1 && slices.Equal(sets[0].Addresses, []string{addr}), addressSets(sets)
		})
	}
	onlySet(ipOf("a"))

	nbw.armed.Store(true)
	changed := ingressFrom("web", "web", "b")
	changed.ResourceVersion = "2" // the fake clientset keeps none; the informer compares them
	if _, err := e.kube.NetworkingV1().NetworkPolicies("ns1").Update(e.ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	onlySet(ipOf("b"))
	if n := nbw.failed.Load(); n != 1 {
		t.Errorf("%d transactions failed, want the policy's first one", n)
	}
}

// describe spells rows out (a pointer's %+v is an address).
func describe(rows []any) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%+v; ", r)
	}
	return b.String()
}
