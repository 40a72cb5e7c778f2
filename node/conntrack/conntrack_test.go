package conntrack

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestDesired(t *testing.T) {
	nodeIPs := []netip.Addr{netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("172.18.0.2")}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dns"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			ExternalIPs: []string{"192.0.2.7"},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 53, NodePort: 30053},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30054},
			}},
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headless"},
		Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53}}}}
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "dns-1", Labels: map[string]string{discovery.LabelServiceName: "dns"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{{Name: ptr.To("tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(5353))},
			{Name: ptr.To("udp"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(5353))}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To("n1")},
			{Addresses: []string{"10.244.2.5"}, NodeName: ptr.To("n2")},
			{Addresses: []string{"10.244.2.6"}, NodeName: ptr.To("n2"), Conditions: discovery.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	policy := svcmodel.ExternalIPPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, NodeIPs: nodeIPs}
	got := Desired([]*corev1.Service{svc, headless}, []*discovery.EndpointSlice{slice}, "n1", nodeIPs, policy)
	tg := Target{Service: "ns/dns", Backends: []netip.AddrPort{ap("10.244.1.5:5353"), ap("10.244.2.5:5353")}}
	want := Table{
		{17, ap("10.96.0.10:53")}:       tg,
		{17, ap("192.0.2.7:53")}:        tg,
		{17, ap("169.254.100.1:30054")}: tg,
		{17, ap("172.18.0.1:30054")}:    tg,
		{17, ap("172.18.0.2:30054")}:    tg,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Desired:\n got %v\nwant %v", got, want)
	}

	// Without endpoints the frontends are there with no backend: every entry to them is
	// stale (a client that sent while the Service had none).
	empty := Desired([]*corev1.Service{svc}, nil, "n1", nodeIPs, policy)
	if tg := empty[Frontend{17, ap("10.96.0.10:53")}]; tg.Service != "ns/dns" || len(tg.Backends) != 0 {
		t.Errorf("no endpoints: %v", tg)
	}
}

func TestStale(t *testing.T) {
	tbl := Table{{17, ap("10.96.0.10:53")}: {Service: "ns/dns", Backends: []netip.AddrPort{ap("10.244.1.5:5353"), ap("10.244.2.5:5353")}}}
	conns := []Conn{
		{Proto: 17, Zone: 3, OrigSrc: ap("10.244.0.3:1000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.5:5353")},  // current
		{Proto: 17, Zone: 3, OrigSrc: ap("10.244.0.4:1000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.9:5353")},  // backend gone
		{Proto: 17, Zone: 3, OrigSrc: ap("10.244.0.5:1000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.5:53")},    // target port changed
		{Proto: 17, Zone: 3, OrigSrc: ap("10.244.0.6:1000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.96.0.10:53")},    // made without backend
		{Proto: 132, Zone: 3, OrigSrc: ap("10.244.0.7:1000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.9:5353")}, // other protocol's frontend
		{Proto: 17, Zone: 4, OrigSrc: ap("10.244.0.8:1000"), OrigDst: ap("10.244.1.9:53"), ReplySrc: ap("10.244.1.9:53")},    // not a Service's
	}
	got := tbl.Stale(conns)
	want := map[string][]Conn{"ns/dns": {conns[1], conns[2], conns[3]}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stale:\n got %v\nwant %v", got, want)
	}
}

func TestParseDump(t *testing.T) {
	dump := strings.Join([]string{
		"udp,orig=(src=10.244.0.3,dst=10.96.0.10,sport=40000,dport=53),reply=(src=10.244.1.5,dst=10.244.0.3,sport=8080,dport=40000),zone=7",
		"tcp,orig=(src=10.244.0.3,dst=10.96.0.10,sport=40000,dport=80),reply=(src=10.244.1.5,dst=10.244.0.3,sport=8080,dport=40000),zone=7,protoinfo=(state=ESTABLISHED)",
		"udp,orig=(src=10.244.0.3,dst=10.96.0.11,sport=1,dport=2),reply=(src=10.244.1.6,dst=10.244.0.3,sport=3,dport=1),mark=2,labels=0x2",
		"sctp,orig=(src=10.244.0.3,dst=10.96.0.12,sport=5,dport=6),reply=(src=10.244.1.7,dst=10.244.0.3,sport=7,dport=5),id=9,zone=65535,status=0",
		"udp,orig=(src=10.244.0.3,dst=10.96.0.13,sport=x,dport=2),reply=(src=10.244.1.6,dst=10.244.0.3,sport=3,dport=1)",
		"icmp,orig=(src=10.244.0.3,dst=10.96.0.10,id=1,type=8,code=0),reply=(src=10.96.0.10,dst=10.244.0.3,id=1,type=0,code=0),zone=3",
		"",
	}, "\n")
	got, err := ParseDump(dump)
	want := []Conn{
		{Proto: 17, Zone: 7, OrigSrc: ap("10.244.0.3:40000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.5:8080")},
		{Proto: 17, Zone: 0, OrigSrc: ap("10.244.0.3:1"), OrigDst: ap("10.96.0.11:2"), ReplySrc: ap("10.244.1.6:3")},
		{Proto: 132, Zone: 65535, OrigSrc: ap("10.244.0.3:5"), OrigDst: ap("10.96.0.12:6"), ReplySrc: ap("10.244.1.7:7")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseDump:\n got %v\nwant %v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "10.96.0.13") {
		t.Errorf("the unreadable line is not reported: %v", err)
	}
}

func TestFlushArgs(t *testing.T) {
	c := Conn{Proto: 17, Zone: 7, OrigSrc: ap("10.244.0.3:40000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.5:8080")}
	want := []string{"zone=7", "ct_nw_src=10.244.0.3,ct_nw_dst=10.96.0.10,ct_nw_proto=17,ct_tp_src=40000,ct_tp_dst=53"}
	if got := c.FlushArgs(); !reflect.DeepEqual(got, want) {
		t.Errorf("FlushArgs: got %q, want %q", got, want)
	}
}

// TestWithManagementAddress: this node's load balancers write its own host-network endpoint
// (the node IP) as its management address; an entry answered from there is not stale, and
// nothing else changes.
func TestWithManagementAddress(t *testing.T) {
	node, mgmt := netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("10.244.1.2")
	f := Frontend{17, ap("10.96.0.10:53")}
	other := Frontend{17, ap("10.96.0.11:53")}
	t0 := Table{
		f:     {Service: "ns/dns", Backends: []netip.AddrPort{ap("10.244.2.5:5353"), ap("172.18.0.1:5353"), ap("172.18.0.2:5353")}},
		other: {Service: "ns/other", Backends: []netip.AddrPort{ap("10.244.2.5:53")}},
	}
	got := t0.WithManagementAddress(node, mgmt)
	want := []netip.AddrPort{ap("10.244.1.2:5353"), ap("10.244.2.5:5353"), ap("172.18.0.1:5353"), ap("172.18.0.2:5353")}
	if !reflect.DeepEqual(got[f].Backends, want) || !reflect.DeepEqual(got[other], t0[other]) {
		t.Errorf("WithManagementAddress: %v", got)
	}
	if len(t0[f].Backends) != 3 {
		t.Errorf("the table given changed: %v", t0)
	}
	conns := []Conn{{Proto: 17, OrigSrc: ap("10.244.1.9:40000"), OrigDst: f.Addr, ReplySrc: ap("10.244.1.2:5353")}}
	if stale := t0.Stale(conns); len(stale) != 1 {
		t.Errorf("without the management address the entry is stale: %v", stale)
	}
	if stale := got.Stale(conns); len(stale) != 0 {
		t.Errorf("an entry answered from the management address is stale: %v", stale)
	}
}
