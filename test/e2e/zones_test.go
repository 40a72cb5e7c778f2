//go:build linux

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestServiceTopologyHints: a Service whose EndpointSlice hints a on node1 for zone-a and c
// on node2 for zone-b (the cluster labels node1 zone-a, node2 zone-b): pods and the host of
// each node reach only their zone's endpoint through the ClusterIP, with real packets. The
// slice is written by hand (a selector-less Service), so the hints do not depend on the
// EndpointSlice controller's arithmetic; the upstream Traffic Distribution tests check
// that side.
func TestServiceTopologyHints(t *testing.T) {
	for node, zone := range map[string]string{"node1": "zone-a", "node2": "zone-b"} {
		n, err := client().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[corev1.LabelTopologyZone]; got != zone {
			t.Fatalf("node %s is in zone %q, want %q (cluster.Options.Zones)", node, got, zone)
		}
	}
	ns := testNamespace(t)
	a, c, client1, client2 := twoBackends(t, ns)
	svc := createService(t, newService(ns, "zoned", "", svcPort("", corev1.ProtocolTCP, 80, 8080)))
	hint := func(e discovery.Endpoint, zone string) discovery.Endpoint {
		e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
		return e
	}
	yes := ptr.To(true)
	s := epSlice(ns, "zoned-1", "zoned", 8080, hint(endpoint(a, yes, yes, nil), "zone-a"), hint(endpoint(c, yes, yes, nil), "zone-b"))
	if _, err := client().DiscoveryV1().EndpointSlices(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := addrPort(svc.Spec.ClusterIP, 80)
	for _, tc := range []struct{ what, from, want string }{
		{"pod on node1", podNetns(t, client1), ns + "/a"},
		{"pod on node2", podNetns(t, client2), ns + "/c"},
		{"node1", cl.Node("node1").Netns, ns + "/a"},
		{"node2", cl.Node("node2").Netns, ns + "/c"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			waitAnswer(t, tc.from, tcp, addr, tc.want)
			if seen := collect(t, tc.from, tcp, addr, 20); len(seen) != 1 || seen[tc.want] != 20 {
				t.Errorf("%v, want only %s", seen, tc.want)
			}
		})
	}
}
