package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// TestHandOver: handOver over NB snapshots, without an NB. Policy ns1/a selects app=a,
// ns1/b app=b; the pod of port "p1" has moved from a to b (its labels changed), "p2" stays in
// a, and the pod of "p3" is gone.
func TestHandOver(t *testing.T) {
	selecting := func(name, app string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	others := []*networkingv1.NetworkPolicy{selecting("a", "a"), selecting("b", "b")}
	pgA, pgB := netpol.PortGroupName("ns1/a"), netpol.PortGroupName("ns1/b")
	moved := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "moved", Labels: map[string]string{"app": "b"}}}
	stays := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "stays", Labels: map[string]string{"app": "a"}}}
	inNB := func(bHolds ...string) handOverSnapshot {
		return handOverSnapshot{
			groups: map[string]*nbdb.PortGroup{pgA: {Name: pgA, Ports: []string{"p1", "p2", "p3"}}, pgB: {Name: pgB, Ports: bHolds}},
			pods:   map[string]*corev1.Pod{"p1": moved, "p2": stays},
		}
	}
	notSyncing := func(nb.Key) bool { return false }
	for _, tc := range []struct {
		name      string
		snap      handOverSnapshot
		syncing   func(nb.Key) bool
		wantNeeds []nb.Key
		wantKeep  []string
	}{
		{name: "b does not hold the moved pod: b first", snap: inNB(), syncing: notSyncing, wantNeeds: []nb.Key{policyKey("ns1/b")}},
		{name: "b holds it already", snap: inNB("p1"), syncing: notSyncing},
		{name: "b waits for this sync: a keeps the pod for now", snap: inNB(),
			syncing: func(k nb.Key) bool { return k == policyKey("ns1/b") }, wantKeep: []string{"p1"}},
		{name: "no port group of a in the NB yet", snap: handOverSnapshot{}, syncing: notSyncing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := &nbdb.PortGroup{Name: pgA, Ports: []string{"p2"}}
			needs, keep := handOver("ns1/a", desired, others, tc.snap, tc.syncing)
			if !slices.Equal(needs, tc.wantNeeds) || !slices.Equal(keep, tc.wantKeep) {
				t.Errorf("needs %v keep %v, want %v and %v", needs, keep, tc.wantNeeds, tc.wantKeep)
			}
			if !slices.Equal(desired.Ports, []string{"p2"}) {
				t.Errorf("handOver changed the desired rows: %v", desired.Ports)
			}
		})
	}
}
