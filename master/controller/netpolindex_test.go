package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/master/netpol"
)

// A peer shared by two policies stays until the last one lets go of it; pod and namespace
// changes find the peers they touch through the index.
func TestNetpolIndexSharesPeers(t *testing.T) {
	x := newNetpolIndex()
	monitoring, _ := netpol.NewPeer("a", &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "true"}}, nil)
	monitoringB, _ := netpol.NewPeer("b", &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "true"}}, nil)
	front, _ := netpol.NewPeer("a", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "front"}})
	if monitoring.Key() != monitoringB.Key() {
		t.Fatal("namespace-selector peers of two namespaces differ")
	}
	if r := x.set("a/p1", []netpol.Peer{monitoring, front}, false); r != nil {
		t.Errorf("released %v", r)
	}
	if r := x.set("b/p1", []netpol.Peer{monitoringB}, true); r != nil {
		t.Errorf("released %v", r)
	}
	if got := x.matching(netpol.Namespace{Name: "a"}, &netpol.Pod{Labels: map[string]string{"app": "front"}}); !slices.Equal(got, []string{front.Key()}) {
		t.Errorf("pod change finds %v", got)
	}
	if got := x.matching(netpol.Namespace{Name: "z", Labels: map[string]string{"monitoring": "true"}}, nil); !slices.Equal(got, []string{monitoring.Key()}) {
		t.Errorf("namespace change finds %v", got)
	}
	if got := x.namedEgressPolicies(); !slices.Equal(got, []string{"b/p1"}) {
		t.Errorf("named egress %v", got)
	}
	if r := x.set("a/p1", nil, false); !slices.Equal(r, []string{front.Key()}) {
		t.Errorf("a/p1 deleted: released %v, want only the front peer", r)
	}
	if _, ok := x.peer(monitoring.Key()); !ok {
		t.Error("the shared peer went with one of its policies")
	}
	if r := x.set("b/p1", nil, false); !slices.Equal(r, []string{monitoring.Key()}) {
		t.Errorf("b/p1 deleted: released %v", r)
	}
	if len(x.peers)+len(x.nsPeers)+len(x.clusterPeers)+len(x.byPolicy)+len(x.namedEgress) != 0 {
		t.Errorf("index not empty: %+v", x)
	}
}
