package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
)

// Security audit 2, finding 8: Services each within --max-service-vips still multiplied a
// namespace's VIPs by the nodes (2,000,000 within the defaults). --max-namespace-vips
// refuses the newer Service whose VIPs would take its namespace past it, with an Event,
// and keeps the older one.
func TestUnitNamespaceVIPLimit(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.ServiceLimits = svcmodel.Limits{PerNamespaceVIPs: 100}
	local := corev1.ServiceInternalTrafficPolicyLocal
	old, newer := portsService("old", "10.96.0.10", 20, time.Now().Add(-time.Hour)), portsService("newer", "10.96.0.11", 20, time.Now())
	old.Spec.InternalTrafficPolicy, newer.Spec.InternalTrafficPolicy = &local, &local
	// 20 ports on 2 node switches: 40 VIPs each, counted 60 (one node's worth more).
	e := startUnit(t, cfg, kubetest.Node("node1", nil), kubetest.Node("node2", nil), old, newer)
	e.waitNodeSubnet("node1")
	e.waitNodeSubnet("node2")
	e.waitVIPsOf("old", 40)
	ev := e.events.WaitEvent(t, "tenant/newer", reasonServiceTooLarge)
	if n := e.vipsOf("newer"); n != 0 {
		t.Errorf("the Service past the namespace's VIPs has %d VIPs (event %q)", n, ev.Message)
	}
}
