package controller

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// reasonExternalIPRefused is svcmodel.ReasonExternalIPRefused, spelt out so that this test
// also builds against a master that has no external IP policy (and fails there).
const reasonExternalIPRefused = "ExternalIPRefused"

func externalIPService(ips ...string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "hijack"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			ExternalIPs: ips, Ports: []corev1.ServicePort{{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22}}},
	}
}

// waitVIPs waits until the Service's cluster load balancer has exactly the VIPs want.
func (e *unitEnv) waitVIPs(want ...string) {
	e.t.Helper()
	slices.Sort(want)
	kubetest.Eventually(e.t, fmt.Sprintf("VIPs %v", want), func() (bool, string) {
		for _, lb := range unitRows[*nbdb.LoadBalancer](e) {
			if lb.Name == "Service_tenant/hijack_TCP_cluster" {
				got := slices.Sorted(maps.Keys(lb.Vips))
				return slices.Equal(got, want), fmt.Sprint(got)
			}
		}
		return false, "no load balancer"
	})
}

// H1: by default no Service may claim an external IP: a tenant's Service naming a node's
// address keeps its ClusterIP, gets no VIP on the node's address, and an Event names it.
func TestUnitExternalIPsRefusedByDefault(t *testing.T) {
	node := kubetest.Node("node1", nil)
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.1"}}
	e := startUnit(t, testConfig("10.244.0.0/16"), node, externalIPService("172.18.0.1", "192.0.2.10"))
	e.waitVIPs("10.96.0.10:22")
	ev := e.events.WaitEvent(t, "tenant/hijack", reasonExternalIPRefused)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %+v is not a warning", ev)
	}
}

// H1: with an allowed range, an address inside it is served; a node's address, a Service
// address and an address outside it are refused, each with an Event on the Service. A node
// that joins later with an address a Service claims takes it away from the Service.
func TestUnitExternalIPPolicy(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	cfg.AllowedExternalIPs = []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16"), netip.MustParsePrefix("192.0.2.0/24")}
	node := kubetest.Node("node1", nil)
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.1"}}
	e := startUnit(t, cfg, node, externalIPService("172.18.0.1", "192.0.2.10", "10.96.0.1", "198.51.100.1", "172.18.0.2"))
	e.waitVIPs("10.96.0.10:22", "192.0.2.10:22", "172.18.0.2:22")
	e.events.WaitEvent(t, "tenant/hijack", reasonExternalIPRefused)
	if n := len(e.events.Events("tenant/hijack")); n < 3 {
		t.Errorf("%d Events on the Service, want one per refused address: %+v", n, e.events.Events("tenant/hijack"))
	}

	node2 := kubetest.Node("node2", nil)
	node2.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}}
	e.create(node2)
	e.waitVIPs("10.96.0.10:22", "192.0.2.10:22")
}
