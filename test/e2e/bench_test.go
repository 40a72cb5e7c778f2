//go:build linux

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/bench/benchutil"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
)

const benchPods = 100

// BenchmarkPodStartup creates 100 pods on one node at once and reports the pods per second
// until every pod is Ready (real kubelet and containerd) and the master's resident memory;
// on a stand-in node also the CNI ADD latency as the runtime sees it (p50, p99). Run it with
// `make bench`.
func BenchmarkPodStartup(b *testing.B) {
	node := cl.Node("node1")
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e6, i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if _, err := client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		before := len(addLatencies(node))
		start := time.Now()
		for p := 0; p < benchPods; p++ {
			if _, err := client().CoreV1().Pods(ns).Create(ctx, cluster.Workload(podSpec(ns, fmt.Sprintf("p%03d", p), node.Name)), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if err := poll.Until(ctx, "100 pods Ready", 100*time.Millisecond, func() (bool, error) {
			pods, err := client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ready := 0
			for i := range pods.Items {
				if isReady(&pods.Items[i]) {
					ready++
				}
			}
			return ready == benchPods, nil
		}); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		adds := addLatencies(node)[before:]
		mem := benchutil.ProcMem(b, cl.MasterPID())
		b.ReportMetric(benchPods/elapsed.Seconds(), "pods/s")
		b.ReportMetric(float64(mem.RSS)/(1<<20), "master-rss-MiB")
		b.ReportMetric(float64(mem.Peak)/(1<<20), "master-peak-MiB")
		b.Logf("%d pods on %s Ready in %s; master memory %s", benchPods, node.Name, elapsed.Round(time.Millisecond), mem)
		if len(adds) > 0 {
			p := benchutil.Percentiles(adds, 50, 99, 100)
			b.ReportMetric(float64(p[0].Microseconds())/1000, "add-p50-ms")
			b.ReportMetric(float64(p[1].Microseconds())/1000, "add-p99-ms")
			b.Logf("%d ADDs, p50 %s, p99 %s, max %s", len(adds), p[0], p[1], p[2])
		}
		client().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		cancel()
	}
}

// addLatencies are the CNI ADD latencies the node's runtime saw: the kubelet stand-in
// records them; a real node's containerd does not tell, and the benchmark reports none.
func addLatencies(n *cluster.Node) []time.Duration {
	if n.Kubelet == nil {
		return nil
	}
	return n.Kubelet.AddLatencies()
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
