package conformance

// Real-packet tests of what cyclonus' cases do not reach: named ports that resolve to
// different numbers on different pods, stateful replies, the node's own traffic through the
// management port, egress judged on a load balancer's chosen backend, and label changes on
// live pods and namespaces. They share the cluster of TestCyclonus, in namespaces of their own.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	tprobe "github.com/ovn-transparent/ovn-transparent/test/probe"
)

// e2eNamespace creates a namespace for one test (deleted when the test ends).
func e2eNamespace(t *testing.T, r *runner, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.deleteNamespace(context.Background(), name); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

type port struct {
	name  string
	num   int32
	proto corev1.Protocol
}

// e2ePod starts a pod on node whose workload answers on ports, and waits until it is Ready.
func e2ePod(t *testing.T, r *runner, ns, name, node string, labels map[string]string, ports ...port) *corev1.Pod {
	t.Helper()
	var cports []corev1.ContainerPort
	for _, p := range ports {
		cports = append(cports, corev1.ContainerPort{Name: p.name, ContainerPort: p.num, Protocol: p.proto})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "workload", Image: "ovnt-workload", Ports: cports}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.client.CoreV1().Pods(ns).Create(ctx, cluster.Workload(pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	if err := poll.Until(ctx, "pod "+ns+"/"+name+" Ready", 50*time.Millisecond, func() (bool, error) {
		p, err := r.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func createPolicy(t *testing.T, r *runner, p *networkingv1.NetworkPolicy) {
	t.Helper()
	if _, err := r.client.NetworkingV1().NetworkPolicies(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePolicy(t *testing.T, r *runner, ns, name string) {
	t.Helper()
	if err := r.client.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// dial makes one connection attempt from netns; the answer must come from wantName when it
// comes.
func dial(netns string, proto corev1.Protocol, ip string, port int, timeout time.Duration, wantName string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var line string
	var perr error
	err := harness.InNetns(netns, func() error {
		addr := netipJoin(ip, port)
		switch proto {
		case corev1.ProtocolUDP:
			line, perr = tprobe.UDP(ctx, addr)
		case corev1.ProtocolSCTP:
			line, perr = tprobe.SCTPInit(ctx, netip.MustParseAddr(ip), uint16(port))
		default:
			line, perr = tprobe.TCP(ctx, addr)
		}
		return nil
	})
	if err != nil || perr != nil {
		return false, err
	}
	name, _, err := tprobe.ParseLine(line)
	if err != nil {
		return false, err
	}
	if wantName != "" && name != wantName {
		return false, fmt.Errorf("answered by %s, want %s", name, wantName)
	}
	return true, nil
}

// expectConn waits for the policies to settle, then checks that a connection from netns to
// ip:port is allowed (want) or not. A mismatch is tried again twice, a second apart, with a
// longer timeout before it fails the test.
func expectConn(t *testing.T, r *runner, what, netns string, proto corev1.Protocol, ip string, port int, wantName string, want bool) {
	t.Helper()
	if err := r.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if proto == corev1.ProtocolSCTP {
		if err := r.flushConntrack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	timeout := probeTimeout
	for try := 0; try < 3; try++ {
		got, err := dial(netns, proto, ip, port, timeout, wantName)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got == want {
			return
		}
		time.Sleep(retryPause)
		timeout = retryTimeout
	}
	verdict := map[bool]string{true: "allowed", false: "blocked"}
	t.Errorf("%s (%s %s:%d): %s, want %s", what, proto, ip, port, verdict[!want], verdict[want])
}

func podNetnsT(t *testing.T, r *runner, p *corev1.Pod) string {
	t.Helper()
	netns, err := r.podNetns(context.Background(), p.Namespace, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	return netns
}

var (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

func protoPtr(p corev1.Protocol) *corev1.Protocol { return &p }

// TestNamedPortPerPod: two servers name different numbers "web"; a policy allowing port
// "web" (ingress on the servers, then egress on the client) opens each server's own number
// and not the other's.
func TestNamedPortPerPod(t *testing.T) {
	r := sharedRunner(t)
	ns := e2eNamespace(t, r, "np-named", nil)
	s1 := e2ePod(t, r, ns, "s1", "node1", map[string]string{"app": "server"}, port{"web", 8080, tcp}, port{"other", 9090, tcp}, port{"dns", 5353, udp})
	s2 := e2ePod(t, r, ns, "s2", "node2", map[string]string{"app": "server"}, port{"web", 9090, tcp}, port{"other", 8080, tcp}, port{"dns", 5354, udp})
	c := e2ePod(t, r, ns, "client", "node1", map[string]string{"app": "client"}, port{"x", 7000, tcp})
	from := podNetnsT(t, r, c)
	web := intstr.FromString("web")
	dns := intstr.FromString("dns")
	check := func(phase string) {
		expectConn(t, r, phase+": client -> s1 web", from, tcp, s1.Status.PodIP, 8080, ns+"/s1", true)
		expectConn(t, r, phase+": client -> s1 other", from, tcp, s1.Status.PodIP, 9090, ns+"/s1", false)
		expectConn(t, r, phase+": client -> s2 web", from, tcp, s2.Status.PodIP, 9090, ns+"/s2", true)
		expectConn(t, r, phase+": client -> s2 other", from, tcp, s2.Status.PodIP, 8080, ns+"/s2", false)
		expectConn(t, r, phase+": client -> s1 dns", from, udp, s1.Status.PodIP, 5353, ns+"/s1", true)
		expectConn(t, r, phase+": client -> s2 dns", from, udp, s2.Status.PodIP, 5354, ns+"/s2", true)
		expectConn(t, r, phase+": client -> s1 on s2's dns number", from, udp, s1.Status.PodIP, 5354, "", false)
	}
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "servers-web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &web}, {Protocol: protoPtr(udp), Port: &dns}},
			}},
		},
	})
	check("ingress")
	deletePolicy(t, r, ns, "servers-web")
	expectConn(t, r, "no policy: client -> s1 other", from, tcp, s1.Status.PodIP, 9090, ns+"/s1", true)
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &web}, {Protocol: protoPtr(udp), Port: &dns}},
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}},
			}},
		},
	})
	check("egress")
}

// TestStatefulReplies: a may open connections to b (b's ingress allows a), a itself accepts
// no ingress at all, and b may not open connections to a: the replies of a's connections pass,
// b's new connections do not (TCP, UDP, SCTP).
func TestStatefulReplies(t *testing.T) {
	r := sharedRunner(t)
	ns := e2eNamespace(t, r, "np-stateful", nil)
	ports := []port{{"t", 8080, tcp}, {"u", 9090, udp}, {"s", 7070, sctp}}
	a := e2ePod(t, r, ns, "a", "node1", map[string]string{"app": "a"}, ports...)
	b := e2ePod(t, r, ns, "b", "node2", map[string]string{"app": "b"}, ports...)
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-no-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	})
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-from-a"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
			}},
		},
	})
	for _, p := range ports {
		expectConn(t, r, "a -> b (the reply must come back)", podNetnsT(t, r, a), p.proto, b.Status.PodIP, int(p.num), ns+"/b", true)
		expectConn(t, r, "b -> a (new connection)", podNetnsT(t, r, b), p.proto, a.Status.PodIP, int(p.num), "", false)
	}
}

// mgmtIP is the node's address on its pod subnet (the management port): the subnet's .2.
func mgmtIP(t *testing.T, r *runner, node string) netip.Addr {
	t.Helper()
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subnet, err := contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
	if err != nil {
		t.Fatal(err)
	}
	return subnet.Addr().Next().Next()
}

// TestNodeToPodUnderDefaultDeny: with ingress and egress denied for every pod of the
// namespace, pods cannot talk to each other, but each node still reaches the pods on itself
// through its management port (kubelet probes), and gets the answers back; a pod on another
// node it does not reach (security audit H3: only a pod's own node is admitted).
func TestNodeToPodUnderDefaultDeny(t *testing.T) {
	r := sharedRunner(t)
	ns := e2eNamespace(t, r, "np-mgmt", nil)
	a := e2ePod(t, r, ns, "a", "node1", nil, port{"t", 8080, tcp}, port{"u", 9090, udp})
	b := e2ePod(t, r, ns, "b", "node2", nil, port{"t", 8080, tcp}, port{"u", 9090, udp})
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	})
	expectConn(t, r, "pod a -> pod b", podNetnsT(t, r, a), tcp, b.Status.PodIP, 8080, "", false)
	for _, n := range r.cl.Nodes {
		for _, p := range []*corev1.Pod{a, b} {
			what := fmt.Sprintf("node %s (%s) -> pod %s on %s", n.Name, mgmtIP(t, r, n.Name), p.Name, p.Spec.NodeName)
			own := n.Name == p.Spec.NodeName
			expectConn(t, r, what, n.Netns, tcp, p.Status.PodIP, 8080, ns+"/"+p.Name, own)
			expectConn(t, r, what, n.Netns, udp, p.Status.PodIP, 9090, ns+"/"+p.Name, own)
		}
	}
}

// TestLabelChangesLive: a policy admits pods labelled role=client from namespaces labelled
// team=blue. Labelling the client pod, then its namespace, then unlabelling the pod, and
// finally recreating it (a new address) all take effect without restarting anything.
func TestLabelChangesLive(t *testing.T) {
	r := sharedRunner(t)
	srvNS := e2eNamespace(t, r, "np-live-srv", nil)
	cliNS := e2eNamespace(t, r, "np-live-cli", nil)
	srv := e2ePod(t, r, srvNS, "srv", "node2", map[string]string{"app": "srv"}, port{"t", 8080, tcp})
	cli := e2ePod(t, r, cliNS, "cli", "node1", map[string]string{"app": "cli"}, port{"t", 8080, tcp})
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: srvNS, Name: "blue-clients"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}},
				}},
			}},
		},
	})
	ctx := context.Background()
	conn := func(what string, want bool) {
		t.Helper()
		expectConn(t, r, what, podNetnsT(t, r, cli), tcp, srv.Status.PodIP, 8080, srvNS+"/srv", want)
	}
	conn("no labels", false)
	if err := r.setPodLabels(ctx, cliNS, "cli", map[string]string{"app": "cli", "role": "client"}); err != nil {
		t.Fatal(err)
	}
	conn("pod labelled, namespace not", false)
	if _, err := r.setNamespaceLabels(ctx, cliNS, map[string]string{"team": "blue"}); err != nil {
		t.Fatal(err)
	}
	conn("pod and namespace labelled", true)
	if err := r.setPodLabels(ctx, cliNS, "cli", map[string]string{"app": "cli"}); err != nil {
		t.Fatal(err)
	}
	conn("pod label removed", false)
	if err := r.deletePod(ctx, cliNS, "cli"); err != nil {
		t.Fatal(err)
	}
	old := cli.Status.PodIP
	cli = e2ePod(t, r, cliNS, "cli", "node2", map[string]string{"app": "cli", "role": "client"}, port{"t", 8080, tcp})
	t.Logf("client recreated on node2: %s -> %s", old, cli.Status.PodIP)
	conn("pod recreated with the label", true)
}

// TestEgressToLoadBalancerBackend: egress policies are judged on the backend a load balancer
// chose, not on its VIP. The branch has no Service controller yet, so the test makes the
// load balancers itself in NB (ovn-nbctl), one VIP per backend, on both node switches.
func TestEgressToLoadBalancerBackend(t *testing.T) {
	r := sharedRunner(t)
	ns := e2eNamespace(t, r, "np-lb", nil)
	good := e2ePod(t, r, ns, "good", "node2", map[string]string{"app": "good"}, port{"t", 8080, tcp})
	bad := e2ePod(t, r, ns, "bad", "node1", map[string]string{"app": "bad"}, port{"t", 8080, tcp})
	cli := e2ePod(t, r, ns, "cli", "node1", map[string]string{"app": "cli"}, port{"t", 8080, tcp})
	ctx := context.Background()
	vips := map[string]string{"good": "10.96.250.1", "bad": "10.96.250.2"}
	for name, vip := range vips {
		backend := good.Status.PodIP
		if name == "bad" {
			backend = bad.Status.PodIP
		}
		lb := "np-lb-test-" + name
		if _, err := r.cl.Central.NBCtl(ctx, "lb-add", lb, vip+":80", backend+":8080", "tcp"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.cl.Central.NBCtl(context.Background(), "--if-exists", "lb-del", lb) })
		for _, n := range r.cl.Nodes {
			if _, err := r.cl.Central.NBCtl(ctx, "ls-lb-add", n.Name, lb); err != nil {
				t.Fatal(err)
			}
		}
	}
	from := podNetnsT(t, r, cli)
	expectConn(t, r, "no policy: cli -> VIP of good", from, tcp, vips["good"], 80, ns+"/good", true)
	expectConn(t, r, "no policy: cli -> VIP of bad", from, tcp, vips["bad"], 80, ns+"/bad", true)
	createPolicy(t, r, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli-to-good"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "cli"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "good"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}},
			}},
		},
	})
	expectConn(t, r, "cli -> VIP of good (backend allowed)", from, tcp, vips["good"], 80, ns+"/good", true)
	expectConn(t, r, "cli -> VIP of bad (backend not allowed)", from, tcp, vips["bad"], 80, "", false)
	expectConn(t, r, "cli -> bad directly", from, tcp, bad.Status.PodIP, 8080, "", false)
	for _, n := range r.cl.Nodes {
		out, err := r.cl.Central.NBCtl(ctx, "--bare", "--columns=load_balancer", "list", "Logical_Switch", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "" {
			t.Errorf("switch %s lost the test's load balancers while the test ran", n.Name)
		}
	}
}
