//go:build linux

package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
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
	expectOwnEndpoint(t, addrPort(svc.Spec.ClusterIP, 80), map[string]string{
		"pod on node1": podNetns(t, client1), "pod on node2": podNetns(t, client2),
		"node1": cl.Node("node1").Netns, "node2": cl.Node("node2").Netns,
	}, map[string]string{"pod on node1": ns + "/a", "pod on node2": ns + "/c", "node1": ns + "/a", "node2": ns + "/c"})

	// The controller manager's side: trafficDistribution PreferSameNode makes it write node
	// hints (feature gate PreferSameTrafficDistribution, on by default in the release).
	t.Run("PreferSameNode", func(t *testing.T) {
		s := newService(ns, "samenode", "web", svcPort("", corev1.ProtocolTCP, 80, 8080))
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode)
		svc := createService(t, s)
		poll.Eventually(t, t.Context(), "node hints on every endpoint of samenode", time.Minute, 200*time.Millisecond, func() (bool, error) {
			list, err := client().DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=samenode"})
			if err != nil {
				return false, err
			}
			n := 0
			for _, sl := range list.Items {
				for _, e := range sl.Endpoints {
					if e.Hints == nil || len(e.Hints.ForNodes) != 1 || e.NodeName == nil || e.Hints.ForNodes[0].Name != *e.NodeName {
						return false, fmt.Errorf("endpoint %v hints %+v", e.Addresses, e.Hints)
					}
					n++
				}
			}
			return n == 2, fmt.Errorf("%d endpoints", n)
		})
		expectOwnEndpoint(t, addrPort(svc.Spec.ClusterIP, 80), map[string]string{
			"pod on node1": podNetns(t, client1), "pod on node2": podNetns(t, client2)},
			map[string]string{"pod on node1": ns + "/a", "pod on node2": ns + "/c"})
	})
}

// expectOwnEndpoint checks that each client (a network namespace, by name) reaches only the
// backend want names for it at addr: 20 of 20 probes.
func expectOwnEndpoint(t *testing.T, addr netip.AddrPort, froms, want map[string]string) {
	t.Helper()
	for what, from := range froms {
		t.Run(what, func(t *testing.T) {
			waitAnswer(t, from, tcp, addr, want[what])
			if seen := collect(t, from, tcp, addr, 20); len(seen) != 1 || seen[want[what]] != 20 {
				t.Errorf("%v, want only %s", seen, want[what])
			}
		})
	}
}
