package netpol

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

func pod(name, ip string, lbls map[string]string, ports ...corev1.ContainerPort) Pod {
	return Pod{Namespace: "ns1", Name: name, Labels: lbls, IP: netip.MustParseAddr(ip), Ports: ports,
		Port: "ns1_" + name, PortUUID: "uuid-" + name}
}

func acls(t *testing.T, out Output) map[string]*nbdb.ACL {
	t.Helper()
	m := map[string]*nbdb.ACL{}
	for _, r := range out.Rows[1:] {
		m[r.ID.Scope] = r.Model.(*nbdb.ACL)
	}
	return m
}

var (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

func TestTranslate(t *testing.T) {
	pods := []Pod{
		pod("a", "10.244.1.3", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
		pod("b", "10.244.1.4", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 9090}),
		pod("c", "10.244.1.5", map[string]string{"app": "db"}),
	}
	end := int32(90)
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}},
				}, Ports: []networkingv1.NetworkPolicyPort{
					{Port: &intstr.IntOrString{IntVal: 80}},
					{Protocol: &udp, Port: &intstr.IntOrString{IntVal: 80}, EndPort: &end},
					{Protocol: &tcp, Port: &intstr.IntOrString{Type: intstr.String, StrVal: "http"}},
				}},
				{},
			},
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &sctp}}}},
		},
	}
	out, err := Translate(context.Background(), Input{Policy: pol, Pods: pods, Logging: Logging{Deny: "warning"},
		Management: ManagementMatch(netip.MustParsePrefix("10.244.0.0/16"), 24)})
	if err != nil {
		t.Fatal(err)
	}
	pg := out.Rows[0].Model.(*nbdb.PortGroup)
	if len(pg.Ports) != 2 || pg.Ports[0] != "uuid-a" || pg.Name != PortGroupName("ns1/web") {
		t.Errorf("port group %+v", pg)
	}
	a := acls(t, out)
	peer, _ := NewPeer("ns1", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}})
	g := "@" + pg.Name
	want := map[string]string{
		"ingress-deny": "outport == " + g + " && ip",
		"ingress-mgmt": "outport == " + g + " && ip4.src == 10.244.0.2/255.255.0.255 && eth.src == 0a:58:0a:f4:00:02/ff:ff:ff:ff:00:ff",
		"ingress-0": "outport == " + g + " && (ip4.src == $" + peer.AddressSetName() +
			" || ip4.src == {192.168.0.0/24, 192.168.2.0/23, 192.168.4.0/22, 192.168.8.0/21, 192.168.16.0/20, 192.168.32.0/19, 192.168.64.0/18, 192.168.128.0/17}) && (tcp.dst == 80 || (udp.dst >= 80 && udp.dst <= 90))",
		"ingress-0-named-tcp-8080": "outport == " + g + ` && outport == {"ns1_a"} && (ip4.src == $` + peer.AddressSetName() +
			" || ip4.src == {192.168.0.0/24, 192.168.2.0/23, 192.168.4.0/22, 192.168.8.0/21, 192.168.16.0/20, 192.168.32.0/19, 192.168.64.0/18, 192.168.128.0/17}) && tcp.dst == 8080",
		"ingress-0-named-tcp-9090": "outport == " + g + ` && outport == {"ns1_b"} && (ip4.src == $` + peer.AddressSetName() +
			" || ip4.src == {192.168.0.0/24, 192.168.2.0/23, 192.168.4.0/22, 192.168.8.0/21, 192.168.16.0/20, 192.168.32.0/19, 192.168.64.0/18, 192.168.128.0/17}) && tcp.dst == 9090",
		"ingress-1":   "outport == " + g + " && ip",
		"egress-deny": "inport == " + g + " && ip",
		"egress-0":    "inport == " + g + " && ip && sctp",
	}
	for rule, m := range want {
		if a[rule] == nil || a[rule].Match != m {
			t.Errorf("%s: got %+v\nwant %s", rule, a[rule], m)
		}
	}
	if len(a) != len(want) {
		t.Errorf("%d ACLs, want %d", len(a), len(want))
	}
	if d := a["ingress-deny"]; d.Action != nbdb.ACLActionDrop || !d.Log || *d.Severity != "warning" || d.Priority != PriorityDeny ||
		d.Meter == nil || *d.Meter != MeterName {
		t.Errorf("deny %+v", d)
	}
	if e := a["egress-0"]; e.Direction != nbdb.ACLDirectionFromLport || e.Options["apply-after-lb"] != "true" || e.Log || e.Meter != nil {
		t.Errorf("egress %+v", e)
	}
	if len(out.Peers) != 1 || out.Peers[0].Key() != peer.Key() {
		t.Errorf("peers %v", out.Peers)
	}
}

func TestPolicyTypesDefaults(t *testing.T) {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "deny"}}
	out, err := Translate(context.Background(), Input{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if a := acls(t, out); len(a) != 1 || a["ingress-deny"] == nil {
		t.Errorf("no rules, no types: ingress isolation only, got %v", a)
	}
	p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	out, _ = Translate(context.Background(), Input{Policy: p})
	if a := acls(t, out); len(a) != 1 || a["egress-deny"] == nil {
		t.Errorf("egress only: got %v", a)
	}
}

func TestFailsClosed(t *testing.T) {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "bad"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{}, {From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}}}
	out, err := Translate(context.Background(), Input{Policy: p, Pods: []Pod{pod("a", "10.244.1.3", nil)}})
	if err == nil {
		t.Fatal("a bad CIDR translated")
	}
	a := acls(t, out)
	if len(a) != 1 || a["ingress-deny"] == nil || len(out.Rows[0].Model.(*nbdb.PortGroup).Ports) != 1 || len(out.Peers) != 0 {
		t.Errorf("not failed closed: %v", a)
	}
}

func TestPeersShareByNormalForm(t *testing.T) {
	a, _ := NewPeer("ns1", &metav1.LabelSelector{MatchLabels: map[string]string{"x": "1", "y": "2"}}, nil)
	b, _ := NewPeer("ns2", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "y", Operator: metav1.LabelSelectorOpIn, Values: []string{"2"}}}, MatchLabels: map[string]string{"x": "1"}},
		&metav1.LabelSelector{})
	if a.Key() != b.Key() {
		t.Errorf("%s and %s differ", a, b)
	}
	c, _ := NewPeer("ns1", nil, nil)
	d, _ := NewPeer("ns2", nil, nil)
	if c.Key() == d.Key() {
		t.Error("the pods of two namespaces share a peer")
	}
	// Kubernetes semantics: a missing key matches NotIn.
	e, _ := NewPeer("ns1", nil, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}})
	if !e.Selects(Namespace{Name: "ns1"}, Pod{}) {
		t.Error("NotIn does not match a pod without the key")
	}
	if !strings.HasPrefix(e.AddressSetName(), "np_peer_") {
		t.Error(e.AddressSetName())
	}
}

func TestParseLogging(t *testing.T) {
	if l, err := ParseLogging(`{"allow":"info","deny":"warning"}`); err != nil || l.Allow != "info" || l.Deny != "warning" {
		t.Errorf("%+v %v", l, err)
	}
	for _, bad := range []string{`{"allow":"loud"}`, `{"other":"info"}`, `nope`} {
		if _, err := ParseLogging(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// H2 (security audit): an ingress ipBlock does not cover the cluster's internal sources that
// are not pods (the join subnet, the nodes' addresses) unless it names them; its excepts are
// left out as before. Judged on addresses: the match's prefixes contain which.
func TestIPBlockClusterInternal(t *testing.T) {
	nodes := []netip.Addr{netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("172.18.0.2")}
	for _, tc := range []struct {
		cidr   string
		except []string
		in     []string
		out    []string
	}{
		{"0.0.0.0/0", []string{"10.244.0.0/16"}, []string{"8.8.8.8", "172.18.0.3", "100.63.255.255", "100.65.0.0", "255.255.255.255", "0.0.0.0"},
			[]string{"10.244.1.5", "100.64.0.2", "100.64.255.255", "172.18.0.1", "172.18.0.2"}},
		{"100.0.0.0/8", nil, []string{"100.1.2.3"}, []string{"100.64.0.2"}},
		{"172.18.0.0/24", []string{"172.18.0.128/25"}, []string{"172.18.0.3", "172.18.0.127"}, []string{"172.18.0.1", "172.18.0.2", "172.18.0.200"}},
		{"100.64.0.0/16", nil, []string{"100.64.0.2"}, nil}, // names the join subnet
		{"172.18.0.1/32", nil, []string{"172.18.0.1"}, nil}, // names a node
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, nil, []string{"10.1.1.1"}},
	} {
		pol := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: tc.cidr, Except: tc.except}}}}}},
		}
		out, err := Translate(context.Background(), Input{Policy: pol, Internal: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}, NodeIPs: nodes})
		if err != nil {
			t.Fatal(err)
		}
		acl := acls(t, out)["ingress-0"]
		if acl == nil {
			t.Fatalf("%s: no ACL", tc.cidr)
		}
		prefix := "outport == @" + PortGroupName("ns1/web") + " && ip4.src == "
		set, ok := strings.CutPrefix(acl.Match, prefix)
		if !ok && len(tc.in) > 0 {
			t.Fatalf("%s: match %q", tc.cidr, acl.Match)
		}
		var ps []netip.Prefix
		for _, f := range strings.Split(strings.Trim(set, "{}"), ", ") {
			if p, err := netip.ParsePrefix(f); err == nil {
				ps = append(ps, p)
			}
		}
		covers := func(a string) bool {
			return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) })
		}
		for _, a := range tc.in {
			if !covers(a) {
				t.Errorf("ipBlock %s except %v does not cover %s: %s", tc.cidr, tc.except, a, acl.Match)
			}
		}
		for _, a := range tc.out {
			if covers(a) {
				t.Errorf("ipBlock %s except %v covers %s: %s", tc.cidr, tc.except, a, acl.Match)
			}
		}
		if len(ps) > 200 {
			t.Errorf("ipBlock %s: %d prefixes", tc.cidr, len(ps))
		}
	}
}

// L3: a pod selector that does not parse (a legacy object kept by the API server's
// ratcheting) fails closed: it selects every pod of its namespace, with only the deny ACLs,
// instead of selecting none and leaving its pods open.
func TestBadSelectorFailsClosed(t *testing.T) {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "legacy"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus", Values: []string{"web"}}}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
		}}
	other := pod("x", "10.244.1.9", map[string]string{"app": "web"})
	other.Namespace = "ns2"
	out, err := Translate(context.Background(), Input{Policy: p, Pods: []Pod{pod("a", "10.244.1.3", nil), pod("b", "10.244.1.4", map[string]string{"app": "db"}), other}})
	if err == nil {
		t.Fatal("a bad selector translated")
	}
	a := acls(t, out)
	if ports := out.Rows[0].Model.(*nbdb.PortGroup).Ports; len(ports) != 2 || len(a) != 1 || a["ingress-deny"] == nil {
		t.Errorf("not failed closed: ports %v, ACLs %v", ports, a)
	}
}

// M5: a policy past Input.MaxSize (ACLs plus peer address sets) fails closed: its pods keep
// their port group and deny ACLs, with no allow rule and no peer, and the error says the
// limit. One rule with many peers costs one ACL but an address set per peer.
func TestMaxSizeFailsClosed(t *testing.T) {
	var peers []networkingv1.NetworkPolicyPeer
	for i := range 20 {
		peers = append(peers, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"n": fmt.Sprint(i)}}})
	}
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "big"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: peers}}}}
	in := Input{Policy: p, Pods: []Pod{pod("a", "10.244.1.3", nil)}}
	out, err := Translate(context.Background(), in)
	if err != nil || len(out.Peers) != 20 {
		t.Fatalf("without a limit: %v, %d peers", err, len(out.Peers))
	}
	in.MaxSize = 21 // 2 ACLs and 20 peers are 22
	out, err = Translate(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "limit of 21") {
		t.Fatalf("past the limit: err %v", err)
	}
	if a := acls(t, out); len(a) != 1 || a["ingress-deny"] == nil || len(out.Peers) != 0 ||
		len(out.Rows[0].Model.(*nbdb.PortGroup).Ports) != 1 {
		t.Errorf("not failed closed: ACLs %v, %d peers", a, len(out.Peers))
	}
	in.MaxSize = 22
	if _, err := Translate(context.Background(), in); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}
