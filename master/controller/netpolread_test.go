package controller

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// failingPods is a pod lister whose every read fails, as a broken cache would.
type failingPods struct{ err error }

func (f failingPods) List(labels.Selector) ([]*corev1.Pod, error) { return nil, f.err }
func (f failingPods) Get(string) (*corev1.Pod, error)             { return nil, f.err }
func (f failingPods) Pods(string) corelisters.PodNamespaceLister  { return f }

// portRows is the NB cache seen by the policy syncs: the pod ports it has, by name.
type portRows map[string]string

func (p portRows) Get(_ context.Context, m model.Model) error {
	lsp, ok := m.(*nbdb.LogicalSwitchPort)
	if !ok || p[lsp.Name] == "" {
		return client.ErrNotFound
	}
	lsp.UUID = p[lsp.Name]
	lsp.ExternalIDs = nb.NewID(nb.Pod, "ns/web", nb.PodPort).ExternalIDs()
	return nil
}

func indexerOf(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// TestNetpolReadErrorIsNotEmpty: when the pods cannot be read, a policy's and a peer's
// desired state is an error (retried), never rows with no pods. An empty port group would
// make the policy's drop ACLs match nobody: the policy would fail open.
func TestNetpolReadErrorIsNotEmpty(t *testing.T) {
	ctx := context.Background()
	namedPort := intstr.FromString("http")
	policies := []*networkingv1.NetworkPolicy{{
		// Isolates every pod of ns for ingress: the pods are read for its port group.
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, {
		// Its egress rule names a port: its peer's pods are read too.
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "named-egress"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &namedPort}},
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			}}},
	}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:   corev1.PodSpec{NodeName: "node1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.244.1.3"}}}}
	broken := errors.New("pod cache unreadable")
	addrs, err := ipam.NewState(netip.MustParsePrefix("10.244.0.0/16"), 24, netip.MustParsePrefix("100.64.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	if err := addrs.ReserveNodeSubnet("node1", netip.MustParsePrefix("10.244.1.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := addrs.ReservePodIP("node1", "ns/web", netip.MustParseAddr("10.244.1.3")); err != nil {
		t.Fatal(err)
	}
	state := func(pods corelisters.PodLister) *netpolState {
		return &netpolState{
			caches:     &caches{pods: pods, ipam: addrs, log: logr.Discard(), recorder: record.NewFakeRecorder(10)},
			policies:   networkinglisters.NewNetworkPolicyLister(indexerOf(t, policies[0], policies[1])),
			namespaces: corelisters.NewNamespaceLister(indexerOf(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})),
			index:      netpol.NewIndex(),
			rows:       portRows{"ns_web": "uuid-web"},
		}
	}

	// Readable pods: the port group holds the pod's port.
	ok := &policyReconciler{state(corelisters.NewPodLister(indexerOf(t, web)))}
	d, err := ok.desired(ctx, "ns/deny-all")
	if err != nil {
		t.Fatal(err)
	}
	if pg := d.rows[0].Model.(*nbdb.PortGroup); len(pg.Ports) != 1 || pg.Ports[0] != "uuid-web" {
		t.Fatalf("port group %v, want the web pod's port", pg.Ports)
	}

	// Unreadable pods: no rows at all, and the read error.
	st := state(failingPods{broken})
	pols := &policyReconciler{st}
	if err := pols.prime(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ns/deny-all", "ns/named-egress"} {
		d, err := pols.desired(ctx, key)
		if !errors.Is(err, broken) {
			t.Errorf("%s: error %v, want the read error", key, err)
		}
		if len(d.rows) != 0 || d.keep || d.afterCommit != nil {
			t.Errorf("%s: %d rows (keep %v) to apply after a read error", key, len(d.rows), d.keep)
		}
	}
	peers := &peerReconciler{st}
	keys, _ := peers.keys()
	if len(keys) != 1 {
		t.Fatalf("peers %v, want the named-egress policy's one", keys)
	}
	d, err = peers.desired(ctx, keys[0])
	if !errors.Is(err, broken) || len(d.rows) != 0 {
		t.Errorf("peer: %d rows, error %v; want no rows and the read error", len(d.rows), err)
	}
}
