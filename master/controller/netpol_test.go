//go:build linux

package controller

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
)

// testPod is a test pod with labels and named container ports.
type testPod struct {
	ns, name string
	ip       netip.Addr
	mac      string
	gwMAC    string
}

func (e *env) createNamespace(name string, lbls map[string]string) {
	e.t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.kube.CoreV1().ServiceAccounts(name).Create(e.ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createLabelledPod(ns, name, node string, lbls map[string]string, ports ...corev1.ContainerPort) testPod {
	e.t.Helper()
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: ports}}},
	}
	if _, err := e.kube.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	pn := e.podNetwork(ns, name)
	e.waitPort(contract.PodPort(ns, name), true)
	return testPod{ns: ns, name: name, ip: pn.IPs[0].Addr(), mac: pn.MAC.String(),
		gwMAC: contract.MACFromIP(pn.Gateways[0]).String()}
}

func (e *env) labelPod(ns, name string, lbls string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":%s}}`, lbls)
	if _, err := e.kube.CoreV1().Pods(ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// traceCT runs ovn-trace with the given conntrack states (one per ct action).
func (e *env) traceCT(ct string, extra []string, datapath, flow string) string {
	e.t.Helper()
	e.nbctl("--wait=sb", "sync")
	args := []string{"--db=" + e.central.SBRemote, "--minimal"}
	for range 6 {
		args = append(args, "--ct="+ct)
	}
	args = append(args, extra...)
	out, err := exec.CommandContext(e.ctx, "ovn-trace", append(args, datapath, flow)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("ovn-trace %s %q: %v\n%s", datapath, flow, err, out)
	}
	return string(out)
}

// conn traces a TCP packet from src to dst (an address and port) on the node switch and
// reports whether it reaches dstPort.
func (e *env) conn(ct string, extra []string, srcPort, srcMAC string, srcIP netip.Addr, dstMAC string, dstIP netip.Addr, proto string, sport, dport int, dstPort string) (bool, string) {
	flow := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && %s && %s.src == %d && %s.dst == %d`,
		srcPort, srcMAC, dstMAC, srcIP, dstIP, proto, proto, sport, proto, dport)
	if proto == "tcp" && strings.HasPrefix(ct, "est") {
		flow += " && tcp.flags == 0x10"
	}
	out := e.traceCT(ct, extra, "node1", flow)
	return strings.Contains(out, fmt.Sprintf("output(%q)", dstPort)), out
}

// expect checks that src reaches dst on port (protocol proto) exactly when allowed,
// waiting for the master to converge.
func (e *env) expect(what string, src, dst testPod, proto string, port int, allowed bool) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s: %s/%s -> %s/%s %s/%d allowed=%v", what, src.ns, src.name, dst.ns, dst.name, proto, port, allowed), func() (bool, string) {
		ok, out := e.conn("new", nil, contract.PodPort(src.ns, src.name), src.mac, src.ip, dst.mac, dst.ip, proto, 40000, port,
			contract.PodPort(dst.ns, dst.name))
		return ok == allowed, out
	})
}

func (e *env) createPolicy(p *networkingv1.NetworkPolicy) {
	e.t.Helper()
	if _, err := e.kube.NetworkingV1().NetworkPolicies(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deletePolicy(ns, name string) {
	e.t.Helper()
	if err := e.kube.NetworkingV1().NetworkPolicies(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func namedPort(name string) []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{{Port: &intstr.IntOrString{Type: intstr.String, StrVal: name}}}
}

// TestNetworkPolicy runs the master against a real NB and northd and judges the policies it
// writes with ovn-trace: selectors, named ports resolved per pod, union of policies, the
// management port, stateful replies, egress judged after the load balancer, label changes,
// logging, and the exact row set after every policy is deleted.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	e.createNode("node1", nil)
	subnet := e.nodeSubnet("node1")
	e.createNamespace("np1", map[string]string{"team": "a"})
	e.createNamespace("np2", map[string]string{"team": "b"})
	http := func(n int32) corev1.ContainerPort { return corev1.ContainerPort{Name: "http", ContainerPort: n} }
	srv := e.createLabelledPod("np1", "srv", "node1", map[string]string{"app": "srv"}, http(8080))
	srv2 := e.createLabelledPod("np1", "srv2", "node1", map[string]string{"app": "srv"}, http(9090))
	cli := e.createLabelledPod("np1", "cli", "node1", map[string]string{"app": "cli"})
	other := e.createLabelledPod("np1", "other", "node1", map[string]string{"app": "other"})
	ext := e.createLabelledPod("np2", "ext", "node1", map[string]string{"app": "cli"})

	// The cases run in order on one cluster, each building on the policies the one before
	// left; each is named, and a failure in one does not hide the others.
	parent := e
	t.Run("no policy: everything allowed", func(t *testing.T) {
		e := parent.in(t)
		e.expect("no policy", cli, srv, "tcp", 8080, true)
	})

	t.Run("ingress by pod selector and named port", func(t *testing.T) {
		e := parent.in(t)

		// Ingress by pod selector and a named port that two pods give different numbers.
		e.createPolicy(&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "srv-from-cli"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "srv"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "cli")}}, Ports: namedPort("http")}}},
		})
		e.expect("named port", cli, srv, "tcp", 8080, true)
		e.expect("named port, other pod's number", cli, srv, "tcp", 9090, false)
		e.expect("named port on srv2", cli, srv2, "tcp", 9090, true)
		e.expect("not selected by the peer", other, srv, "tcp", 8080, false)
		e.expect("peer in another namespace", ext, srv, "tcp", 8080, false)
		e.expect("pods no policy selects", srv, cli, "tcp", 5000, true)

	})

	t.Run("the management port stays allowed", func(t *testing.T) {
		e := parent.in(t)
		// The management port (kubelet probes) stays allowed.
		mgmt := contract.ManagementIP(subnet)
		ok, out := e.conn("new", nil, "k8s-node1", contract.MACFromIP(mgmt).String(), mgmt, srv.mac, srv.ip, "tcp", 40000, 1234, "np1_srv")
		if !ok {
			t.Errorf("management port -> srv blocked:\n%s", out)
		}

	})

	t.Run("union of two policies, endPort range", func(t *testing.T) {
		e := parent.in(t)
		// Union: a second policy opens UDP from team=b namespaces (with the endPort range).
		udp := corev1.ProtocolUDP
		end := int32(5010)
		e.createPolicy(&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "srv-udp-from-team-b"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "srv"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "b")}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &intstr.IntOrString{IntVal: 5000}, EndPort: &end}}}}},
		})
		e.expect("union: udp range from team b", ext, srv, "udp", 5005, true)
		e.expect("udp range end", ext, srv, "udp", 5011, false)
		e.expect("union keeps the first policy", cli, srv, "tcp", 8080, true)
		e.expect("udp from team a", cli, srv, "udp", 5005, false)

	})

	t.Run("namespace and pod label changes", func(t *testing.T) {
		e := parent.in(t)
		// A namespace label change moves its pods out of a namespace-selector peer and back.
		e.labelNamespace("np2", `{"team":"c"}`)
		e.expect("namespace relabelled", ext, srv, "udp", 5005, false)
		e.labelNamespace("np2", `{"team":"b"}`)
		e.expect("namespace relabelled back", ext, srv, "udp", 5005, true)

		// A label change moves a pod into a peer.
		e.labelPod("np1", "other", `{"app":"cli"}`)
		e.expect("relabelled pod", other, srv, "tcp", 8080, true)
		e.labelPod("np1", "other", `{"app":"other"}`)
		e.expect("relabelled back", other, srv, "tcp", 8080, false)

	})

	t.Run("egress, judged on the load balancer's backend", func(t *testing.T) {
		e := parent.in(t)
		// Egress of cli: only to srv on 8080, judged on the backend a load balancer picks.
		e.createPolicy(&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "cli-egress"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "cli"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "srv")}}, Ports: []networkingv1.NetworkPolicyPort{{Port: &intstr.IntOrString{IntVal: 8080}}}}}},
		})
		e.expect("egress allowed", cli, srv, "tcp", 8080, true)
		e.expect("egress to a pod not in the peer", cli, other, "tcp", 8080, false)
		e.expect("ingress of cli is not isolated", other, cli, "tcp", 8080, true)
		e.nbctl("lb-add", "vip-srv", "172.30.0.10:80", srv.ip.String()+":8080", "tcp")
		e.nbctl("lb-add", "vip-other", "172.30.0.11:80", other.ip.String()+":8080", "tcp")
		e.nbctl("ls-lb-add", "node1", "vip-srv")
		e.nbctl("ls-lb-add", "node1", "vip-other")
		vip := func(v string, backend testPod) (bool, string) {
			return e.conn("new", []string{"--lb-dst=" + backend.ip.String() + ":8080"}, "np1_cli", cli.mac, cli.ip, cli.gwMAC,
				netip.MustParseAddr(v), "tcp", 40000, 80, contract.PodPort(backend.ns, backend.name))
		}
		if ok, out := vip("172.30.0.10", srv); !ok {
			t.Errorf("cli -> service -> srv:8080 blocked by egress policy:\n%s", out)
		}
		if ok, out := vip("172.30.0.11", other); ok {
			t.Errorf("cli -> service -> other:8080 passed the egress policy:\n%s", out)
		}

	})

	t.Run("stateful: replies pass an egress-isolated pod", func(t *testing.T) {
		e := parent.in(t)
		// Stateful: srv's replies to cli pass although srv is egress-isolated, new connections from
		// srv do not.
		e.createPolicy(&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "srv-no-egress"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "srv"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
		})
		e.expect("egress deny of srv", srv, other, "tcp", 5000, false)
		ok, out := e.conn("est,rpl", nil, "np1_srv", srv.mac, srv.ip, cli.mac, cli.ip, "tcp", 8080, 40000, "np1_cli")
		if !ok {
			t.Errorf("reply srv -> cli dropped:\n%s", out)
		}

	})

	t.Run("ACL logging from the namespace annotation", func(t *testing.T) {
		e := parent.in(t)
		// Logging: the namespace annotation reaches existing ACLs, and a change too.
		e.annotateNamespace("np1", `{"allow":"info","deny":"warning"}`)
		e.eventually("logging on", func() (bool, string) {
			got := e.nbctl("--bare", "--columns=action,log,severity,meter", "find", "acl", "name=np1/srv-from-cli/ingress-deny")
			return strings.Join(strings.Fields(got), " ") == "drop true warning "+netpol.MeterName, got
		})
		e.annotateNamespace("np1", `{"deny":"alert"}`)
		e.eventually("logging changed", func() (bool, string) {
			got := e.nbctl("--bare", "--columns=log,severity", "find", "acl", "name=np1/srv-from-cli/ingress-0-named-tcp-8080")
			deny := e.nbctl("--bare", "--columns=severity", "find", "acl", "name=np1/srv-from-cli/ingress-deny")
			return strings.Join(strings.Fields(got), " ") == "false" && deny == "alert", got + " / " + deny
		})
		if got := e.nbctl("--bare", "--columns=name,unit,fair", "list", "meter"); strings.Join(strings.Fields(got), " ") != netpol.MeterName+" pktps true" {
			t.Errorf("ACL log meter: %q", got)
		}
		if got := strings.Join(strings.Fields(e.nbctl("--bare", "--columns=action,rate,burst_size", "list", "meter_band")), " "); got != fmt.Sprintf("drop %d %d", netpol.MeterRate, netpol.MeterBurst) {
			t.Errorf("ACL log meter band: %q", got)
		}
		t.Logf("acl-list of a policy's port group:\n%s", e.nbctl("acl-list", netpol.PortGroupName("np1/srv-from-cli")))

	})

	t.Run("deleted policies leave nothing", func(t *testing.T) {
		e := parent.in(t)
		// Delete every policy: no port group, ACL or address set is left.
		for _, n := range []string{"srv-from-cli", "srv-udp-from-team-b", "cli-egress", "srv-no-egress"} {
			e.deletePolicy("np1", n)
		}
		e.eventually("no policy rows", func() (bool, string) {
			got := e.nbctl("--bare", "--columns=name", "list", "port_group") + e.nbctl("--bare", "--columns=_uuid", "list", "acl") +
				e.nbctl("--bare", "--columns=name", "list", "address_set")
			return got == "", got
		})
		e.expect("all deleted", other, srv, "tcp", 8080, true)
	})
}

func (e *env) labelNamespace(name, lbls string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":%s}}`, lbls)
	if _, err := e.kube.CoreV1().Namespaces().Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) annotateNamespace(name, logging string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, netpol.LoggingAnnotation, logging)
	if _, err := e.kube.CoreV1().Namespaces().Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestNetworkPolicyRestart: a policy deleted while no master runs loses its port group,
// ACLs and address set at the next start; the rows of the policy that stays are kept as
// they are.
func TestNetworkPolicyRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	m := e.startMaster(cfg)
	e.createNode("node1", nil)
	e.createNamespace("np1", nil)
	e.createLabelledPod("np1", "a", "node1", map[string]string{"app": "a"})
	for _, name := range []string{"keep", "gone"} {
		e.createPolicy(&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "a"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("peer", name)}}}}},
		})
	}
	keepPeer, _ := netpol.NewPeer("np1", nil, sel("peer", "keep"))
	gonePeer, _ := netpol.NewPeer("np1", nil, sel("peer", "gone"))
	rows := func() string {
		return strings.Join(strings.Fields(e.nbctl("--bare", "--columns=name", "list", "port_group")+" "+
			e.nbctl("--bare", "--columns=name", "list", "address_set")), " ")
	}
	both := strings.Join([]string{netpol.PortGroupName("np1/gone"), netpol.PortGroupName("np1/keep"),
		gonePeer.AddressSetName(), keepPeer.AddressSetName()}, " ")
	e.eventually("both policies' rows", func() (bool, string) {
		got := strings.Fields(rows())
		return len(got) == 4 && sameWords(got, strings.Fields(both)), rows()
	})
	keepUUID := e.nbctl("--bare", "--columns=_uuid", "find", "port_group", "name="+netpol.PortGroupName("np1/keep"))
	m.stop()
	e.deletePolicy("np1", "gone")
	e.startMaster(cfg)
	want := []string{netpol.PortGroupName("np1/keep"), keepPeer.AddressSetName()}
	e.eventually("only the kept policy's rows", func() (bool, string) {
		return sameWords(strings.Fields(rows()), want), rows()
	})
	if got := e.nbctl("--bare", "--columns=_uuid", "find", "port_group", "name="+netpol.PortGroupName("np1/keep")); got != keepUUID {
		t.Errorf("the kept policy's port group was replaced: %s, was %s", got, keepUUID)
	}
	if n := len(e.lines("--bare", "--columns=_uuid", "list", "acl")); n != 3 {
		t.Errorf("%d ACLs, want the kept policy's 3 (deny, management, rule)", n)
	}
}

func sameWords(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestNetworkPolicyBadInput: a policy the translator cannot express exactly (an ipBlock the
// API server accepts with a leading-zero octet, which C and Go readers disagree on) gets a
// Warning Event and fails closed: the pods it selects get its drop ACLs without its allows;
// pods it does not select keep their traffic, and other policies still work.
func TestNetworkPolicyBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	e.createNode("node1", nil)
	e.createNamespace("np1", nil)
	a := e.createLabelledPod("np1", "a", "node1", map[string]string{"app": "a"})
	b := e.createLabelledPod("np1", "b", "node1", map[string]string{"app": "b"})
	c := e.createLabelledPod("np1", "c", "node1", map[string]string{"app": "c"})
	_, err := e.kube.NetworkingV1().NetworkPolicies("np1").Create(e.ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "bad"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "010.0.0.0/8"}},
			}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the API server refused the policy, so this test cannot make its point: %v", err)
	}
	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "np1", Name: "good"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "c"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "b")}}}}},
	})
	e.waitEvent("bad", ReasonInvalidNetworkPolicy)
	e.expect("bad policy fails closed", b, a, "tcp", 80, false)
	e.expect("pods the bad policy does not select", a, b, "tcp", 80, true)
	e.expect("another policy still allows", b, c, "tcp", 80, true)
	e.expect("and still denies", a, c, "tcp", 80, false)
}
