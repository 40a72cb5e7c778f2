package netpol

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A peer shared by two policies stays until the last one lets go of it; pod and namespace
// changes find the peers they touch through the index.
func TestIndexSharesPeers(t *testing.T) {
	x := NewIndex()
	monitoring, _ := NewPeer("a", &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "true"}}, nil)
	monitoringB, _ := NewPeer("b", &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "true"}}, nil)
	front, _ := NewPeer("a", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "front"}})
	if monitoring.Key() != monitoringB.Key() {
		t.Fatal("namespace-selector peers of two namespaces differ")
	}
	if r := x.Set("a/p1", []Peer{monitoring, front}, false); r != nil {
		t.Errorf("released %v", r)
	}
	if r := x.Set("b/p1", []Peer{monitoringB}, true); r != nil {
		t.Errorf("released %v", r)
	}
	if got := x.Matching(Namespace{Name: "a"}, &Pod{Labels: map[string]string{"app": "front"}}); !slices.Equal(got, []string{front.Key()}) {
		t.Errorf("pod change finds %v", got)
	}
	if got := x.Matching(Namespace{Name: "z", Labels: map[string]string{"monitoring": "true"}}, nil); !slices.Equal(got, []string{monitoring.Key()}) {
		t.Errorf("namespace change finds %v", got)
	}
	if got := x.NamedEgressPolicies(); !slices.Equal(got, []string{"b/p1"}) {
		t.Errorf("named egress %v", got)
	}
	if r := x.Set("a/p1", nil, false); !slices.Equal(r, []string{front.Key()}) {
		t.Errorf("a/p1 deleted: released %v, want only the front peer", r)
	}
	if _, ok := x.Peer(monitoring.Key()); !ok {
		t.Error("the shared peer went with one of its policies")
	}
	if r := x.Set("b/p1", nil, false); !slices.Equal(r, []string{monitoring.Key()}) {
		t.Errorf("b/p1 deleted: released %v", r)
	}
	if len(x.peers)+len(x.nsPeers)+len(x.clusterPeers)+len(x.byPolicy)+len(x.namedEgress) != 0 {
		t.Errorf("index not empty: %+v", x)
	}
}
