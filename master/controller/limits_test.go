package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// reasonServiceTooLarge is svcmodel.ReasonServiceTooLarge, spelt out so that the test names
// what the Event must say.
const reasonServiceTooLarge = "ServiceTooLarge"

// portsService is a ClusterIP Service of tenant with n TCP ports, created at age.
func portsService(name, clusterIP string, n int, age time.Time) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, CreationTimestamp: metav1.NewTime(age)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}},
	}
	for i := range n {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
	}
	return s
}

// vipsOf counts the VIPs of the load balancers of Service tenant/name.
func (e *unitEnv) vipsOf(name string) int {
	n := 0
	for _, lb := range unitRows[*nbdb.LoadBalancer](e) {
		if strings.HasPrefix(lb.Name, "Service_tenant/"+name+"_") {
			n += len(lb.Vips)
		}
	}
	return n
}

func (e *unitEnv) waitVIPsOf(name string, want int) {
	e.t.Helper()
	kubetest.Eventually(e.t, fmt.Sprintf("%d VIPs of %s", want, name), func() (bool, string) {
		got := e.vipsOf(name)
		return got == want, fmt.Sprint(got)
	})
}

// M5: a namespace user cannot make the master write a Service of any size. A Service with
// more frontends than --max-service-frontends gets no load balancer and an Event naming it;
// its neighbours are served. In a namespace past --max-namespace-frontends the newer
// Service is the one refused, and it is served once the older one shrinks.
func TestUnitServiceLimits(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.ServiceLimits = svcmodel.Limits{PerService: 100, PerNamespace: 150}
	old := time.Now().Add(-time.Hour)
	huge := portsService("huge", "10.96.0.10", 5000, old.Add(-time.Hour))
	small := portsService("small", "10.96.0.11", 100, old)
	newer := portsService("newer", "10.96.0.12", 80, old.Add(time.Minute))
	e := startUnit(t, cfg, huge, small, newer)

	e.waitVIPsOf("small", 100)
	e.events.WaitEvent(t, "tenant/huge", reasonServiceTooLarge)
	e.events.WaitEvent(t, "tenant/newer", reasonServiceTooLarge)
	if n := e.vipsOf("huge"); n != 0 {
		t.Errorf("the refused Service has %d VIPs", n)
	}
	if n := e.vipsOf("newer"); n != 0 {
		t.Errorf("the Service past the namespace's limit has %d VIPs", n)
	}

	// The older Service shrinks: the newer one fits now.
	small = portsService("small", "10.96.0.11", 10, old)
	if _, err := e.kube.CoreV1().Services("tenant").Update(context.Background(), small, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVIPsOf("small", 10)
	e.waitVIPsOf("newer", 80)
}

// M5: a Service within the frontends limit can still multiply by the nodes (internal
// traffic policy Local has a load balancer per node switch); --max-service-vips refuses it
// as a whole, and a Service that grows past it loses its load balancers.
func TestUnitServiceVIPLimit(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.MaxServiceVIPs = 50
	svc := portsService("local", "10.96.0.10", 20, time.Now())
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc.Spec.InternalTrafficPolicy = &local
	e := startUnit(t, cfg, kubetest.Node("node1", nil), svc)
	e.waitNodeSubnet("node1")
	e.waitVIPsOf("local", 20) // one load balancer per node switch

	e.create(kubetest.Node("node2", nil))
	e.create(kubetest.Node("node3", nil))
	e.waitVIPsOf("local", 0)
	ev := e.events.WaitEvent(t, "tenant/local", reasonServiceTooLarge)
	if !strings.Contains(ev.Message, "over the limit of 50") {
		t.Errorf("event %q does not say the limit", ev.Message)
	}
}
