package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
)

// TestUnitEventToNBCountsCommitsOnly: the master's own latency histogram measures syncs that
// changed the NB; a sync that found the NB right (an event that changes nothing there, or
// the NB's echo of the master's own write) counts as unchanged, not as a change's latency.
func TestUnitEventToNBCountsCommitsOnly(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"))
	m := e.ctrl.metrics
	latencies := func() uint64 {
		var d dto.Metric
		if err := m.eventToNB.WithLabelValues("Node").(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount()
	}
	count := func(result string) float64 { return testutil.ToFloat64(m.syncs.WithLabelValues("Node", result)) }
	// settled waits until the Node key's figures stop moving and returns them.
	settled := func(what string) (uint64, float64) {
		var lat uint64
		var unchanged float64
		kubetest.Eventually(t, what, func() (bool, string) {
			l, u := latencies(), count("unchanged")
			time.Sleep(500 * time.Millisecond)
			lat, unchanged = latencies(), count("unchanged")
			return l == lat && u == unchanged && e.ctrl.queue.Len() == 0, fmt.Sprintf("latencies %d -> %d, unchanged %v -> %v", l, lat, u, unchanged)
		})
		return lat, unchanged
	}

	if _, err := e.kube.CoreV1().Nodes().Create(e.ctx, kubetest.Node("node1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRow(e, "switch node1", lsNamed("node1"))
	lat, unchanged := settled("the new node's syncs")
	if lat == 0 || count("ok") == 0 {
		t.Fatalf("creating node1 observed %d latencies, %v ok syncs; want both > 0", lat, count("ok"))
	}

	// An annotation the NB does not depend on: the key syncs and changes nothing.
	n := e.node("node1")
	n.Annotations["example.com/team"] = "network"
	if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, "the annotation change's sync", func() (bool, string) {
		return count("unchanged") > unchanged, fmt.Sprintf("unchanged %v", count("unchanged"))
	})
	lat2, unchanged := settled("the annotation change's syncs")
	if lat2 != lat {
		t.Errorf("a sync that changed nothing was counted as a change's latency: %d -> %d", lat, lat2)
	}

	// The node's switch deleted behind the master's back: the sync that puts it back counts.
	ops, err := e.reader.WhereCache(lsNamed("node1")).Delete()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(e.ctx, e.reader, ops...); err != nil {
		t.Fatal(err)
	}
	waitRow(e, "switch node1 again", lsNamed("node1"))
	kubetest.Eventually(t, "the repair counted", func() (bool, string) {
		return latencies() > lat2, fmt.Sprintf("latencies %d", latencies())
	})
}
