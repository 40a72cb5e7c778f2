package svcmodel

import (
	"fmt"
	"strings"
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

// Security audit 2, finding 8: within the default limits one namespace made the master write
// 2,000,000 VIPs (40 Services of 500 ports, internalTrafficPolicy Local, 100 nodes) and the
// nodes 38,013 gateway rules each (externalIPs). The default limits now bound what is
// written: VIPs (master) and gateway entry points (master and nodes alike), per namespace.
func TestLimitsBoundWhatIsWritten(t *testing.T) {
	l := Limits{PerService: DefaultMaxServiceFrontends, PerNamespace: DefaultMaxNamespaceFrontends,
		PerNamespaceEntryPoints: DefaultMaxNamespaceEntryPoints, PerNamespaceVIPs: DefaultMaxNamespaceVIPs}
	local := corev1.ServiceInternalTrafficPolicyLocal
	var svcs []*corev1.Service
	for i := range 40 {
		s := sized("audit", fmt.Sprintf("local-%02d", i), 500, time.Duration(i)*time.Minute)
		s.Spec.Type, s.Spec.ExternalIPs, s.Spec.InternalTrafficPolicy = corev1.ServiceTypeClusterIP, nil, &local
		svcs = append(svcs, s)
	}
	const nodes = 100
	written := func(refused map[string]Problem, each func(*corev1.Service) int) (n, admitted int) {
		for _, s := range svcs {
			if _, no := refused[s.Namespace+"/"+s.Name]; !no {
				n, admitted = n+each(s), admitted+1
			}
		}
		return n, admitted
	}
	// 500 VIPs on each of 100 node switches and none left in the cluster LB: the estimate
	// is the bound, one node's worth above.
	if v := VIPs(svcs[0], nodes); v != 500*101 {
		t.Errorf("VIPs of one Service = %d", v)
	}
	refused := l.RefusedOnMaster(svcs, nodes)
	if n, admitted := written(refused, func(s *corev1.Service) int { return 500 * nodes }); n > DefaultMaxNamespaceVIPs || admitted != 1 {
		t.Errorf("VIPs: %d Services admitted, %d VIPs written", admitted, n)
	}
	for k, p := range refused {
		if p.Reason != ReasonServiceTooLarge || !strings.Contains(p.Message, "VIPs") {
			t.Errorf("%s: %+v", k, p)
		}
	}
	// The node agents do not count VIPs: they refuse none of these.
	if r := l.Refused(svcs); len(r) != 0 {
		t.Errorf("without nodes: refused %v", r)
	}

	// 10 Services of 100 ports on a cluster IP and 19 external IPs: 20,000 frontends, in the
	// frontend limits, 19,000 entry points (38,000 rules on every node).
	svcs = nil
	for i := range 10 {
		s := sized("ext", fmt.Sprintf("ext-%d", i), 100, time.Duration(i)*time.Minute)
		s.Spec.Type, s.Spec.ExternalIPs = corev1.ServiceTypeClusterIP, nil
		for j := range 19 {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, fmt.Sprintf("192.0.2.%d", j+1))
		}
		svcs = append(svcs, s)
	}
	for _, r := range []map[string]Problem{l.Refused(svcs), l.RefusedOnMaster(svcs, nodes)} {
		if n, admitted := written(r, EntryPoints); n > DefaultMaxNamespaceEntryPoints || admitted != 1 {
			t.Errorf("entry points: %d Services admitted, %d entry points", admitted, n)
		}
	}
}

// Entry points: each port once per external and ingress IP and once for its NodePort.
func TestEntryPoints(t *testing.T) {
	s := sized("a", "s", 10, 0) // NodePort, 2 external IPs
	if got := EntryPoints(s); got != 30 {
		t.Errorf("EntryPoints = %d, want 30", got)
	}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
	if got := EntryPoints(s); got != 40 {
		t.Errorf("LoadBalancer EntryPoints = %d, want 40", got)
	}
	s.Spec.Type, s.Spec.ExternalIPs = corev1.ServiceTypeClusterIP, nil
	if got := EntryPoints(s); got != 0 {
		t.Errorf("ClusterIP EntryPoints = %d", got)
	}
}
