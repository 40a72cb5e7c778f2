package svcmodel

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func sized(ns, name string, ports int, age time.Duration) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(age))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			ExternalIPs: []string{"192.0.2.1", "192.0.2.2"}},
	}
	for i := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint(i), Protocol: corev1.ProtocolTCP, Port: int32(i + 1)})
	}
	return s
}

// Each port counts once per cluster IP, external IP, ingress IP and node port.
func TestFrontends(t *testing.T) {
	s := sized("a", "s", 5000, 0)
	if got := Frontends(s); got != 5000*4 {
		t.Errorf("Frontends = %d, want %d", got, 5000*4)
	}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "lb.example"}}
	if got := Frontends(s); got != 5000*6 {
		t.Errorf("LoadBalancer Frontends = %d, want %d", got, 5000*6)
	}
	s.Spec.ClusterIP = corev1.ClusterIPNone
	if got := Frontends(s); got != 0 {
		t.Errorf("headless Frontends = %d", got)
	}
}

// M5: the audit's Service (5,000 ports, 20 external IPs) is refused by the default limits;
// per namespace the oldest Services keep their place, and other namespaces are counted apart.
func TestLimitsRefused(t *testing.T) {
	l := Limits{PerService: DefaultMaxServiceFrontends, PerNamespace: 100}
	audit := sized("a", "audit", 5000, 0)
	for i := range 20 {
		audit.Spec.ExternalIPs = append(audit.Spec.ExternalIPs, fmt.Sprintf("192.0.2.%d", 10+i))
	}
	old := sized("a", "old", 10, time.Minute)   // 40
	mid := sized("a", "mid", 10, 2*time.Minute) // 40: 80 in all
	late := sized("a", "late", 10, 3*time.Minute)
	tiny := sized("a", "tiny", 5, 4*time.Minute) // 20: still fits beside old and mid
	other := sized("b", "late", 20, 0)           // 80, alone in its namespace
	refused := l.Refused([]*corev1.Service{late, tiny, other, mid, audit, old})
	want := map[string]bool{"a/audit": true, "a/late": true}
	if len(refused) != len(want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	for k, p := range refused {
		if !want[k] || p.Reason != ReasonServiceTooLarge || p.Message == "" {
			t.Errorf("refused %s: %+v", k, p)
		}
	}
	got := l.Admitted([]*corev1.Service{late, tiny, other, mid, audit, old})
	if len(got) != 4 || got[0] != tiny || got[3] != old {
		t.Errorf("admitted %d Services, in another order", len(got))
	}
	if r := (Limits{}).Refused([]*corev1.Service{audit}); len(r) != 0 {
		t.Errorf("no limits refused %v", r)
	}
	// A namespace far below its limit (the shortcut without sorting) or without one still
	// has each Service held to the per-Service limit.
	big, small := sized("c", "big", 10, 0), sized("c", "small", 5, time.Minute) // 40, 20
	for _, l := range []Limits{{PerService: 30, PerNamespace: 1000}, {PerService: 30}} {
		if r := l.Refused([]*corev1.Service{small, big}); len(r) != 1 || r["c/big"].Reason != ReasonServiceTooLarge {
			t.Errorf("%+v refused %v, want c/big alone", l, r)
		}
	}
}
