//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// The sample workloads: web servers on both nodes in one namespace, a client in another, and
// a stranger in a third, which the sample NetworkPolicy keeps out.
var samples = []struct{ namespace, name, node string }{
	{"demo", "web-1", "node1"},
	{"demo", "web-2", "node2"},
	{"demo-client", "client", "node1"},
	{"demo-other", "stranger", "node2"},
}

// The sample NetworkPolicy: the web pods accept their http port from pods of demo-client and
// from outside the pod network (the NodePort's clients); other pods are denied.
const samplePolicy = "web"

func samplePolicySpec(clusterCIDR string) *networkingv1.NetworkPolicy {
	http := intstr.FromString("http")
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: samplePolicy},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &http}},
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "demo-client"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{clusterCIDR}}},
				},
			}},
		},
	}
}

const samplePort = 8080

// The sample Service: demo/web, both web pods behind ClusterIP port 80 and NodePort
// sampleNodePort on every node. externalTrafficPolicy Local: a node sends its NodePort's
// clients to its own web pod with their address kept, so the sample policy admits the
// external host as "outside the pod network". With Cluster, the gateway router would SNAT
// them to its join address, which NetworkPolicy ipBlocks never count as outside (it is also
// where a pod of another namespace would come from through another node's NodePort).
const (
	sampleService  = "web"
	sampleSvcPort  = 80
	sampleNodePort = 30080
)

func sampleServiceSpec() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: sampleService},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeNodePort,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"tier": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: sampleSvcPort,
				TargetPort: intstr.FromInt32(samplePort), NodePort: sampleNodePort}},
		},
	}
}

func createSamples(ctx context.Context, c *cluster.Cluster) error {
	cs := c.Kube.Client()
	for _, ns := range []string{"demo", "demo-client", "demo-other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, s := range samples {
		node := s.node
		if c.Node(node) == nil {
			node = c.Nodes[0].Name
		}
		// Every sample runs agnhost netexec, as the upstream e2e tests do: GET /hostname
		// answers the pod's name.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, Labels: map[string]string{"app": s.name, "tier": tier(s.name)}},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
				Name: "netexec", Image: images.Agnhost,
				Args:  []string{"netexec", fmt.Sprintf("--http-port=%d", samplePort), "--udp-port=-1"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: samplePort, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/hostname", Port: intstr.FromString("http")}}},
			}}},
		}
		if _, err := cs.CoreV1().Pods(s.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Services("demo").Create(ctx, sampleServiceSpec(), metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("demo").Create(ctx, samplePolicySpec(c.ClusterCIDR()), metav1.CreateOptions{}); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, s := range samples {
		if err := poll.Until(wctx, "sample pod "+s.namespace+"/"+s.name+" Ready", 100*time.Millisecond, func() (bool, error) {
			p, err := cs.CoreV1().Pods(s.namespace).Get(wctx, s.name, metav1.GetOptions{})
			return err == nil && podReady(p), err
		}); err != nil {
			return err
		}
	}
	return nil
}

// tier is the label the sample Service selects: "web" for the web pods.
func tier(pod string) string {
	if strings.HasPrefix(pod, "web-") {
		return "web"
	}
	return "client"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.Status.PodIP != ""
		}
	}
	return false
}

// podNetns maps every running pod that has a network of its own to the path of its
// network namespace.
func podNetns(ctx context.Context, c *cluster.Cluster) map[string]string {
	out := map[string]string{}
	pods, err := c.Kube.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return out
	}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if n := c.Node(p.Spec.NodeName); n != nil {
			if path, err := n.PodNetnsPath(ctx, p.Namespace, p.Name); err == nil {
				out[p.Namespace+"/"+p.Name] = path
			}
		}
	}
	return out
}

// connectivity probes every sample web pod from the client pod, live, and prints the result.
func connectivity(ctx context.Context, s state) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		fmt.Println("connectivity check:", err)
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Println("connectivity check:", err)
		return
	}
	from, ok := s.Pods["demo-client/client"]
	if !ok {
		fmt.Println("connectivity check: the sample client pod is gone")
		return
	}
	fmt.Println("\n$ connectivity check (TCP, from demo-client/client)")
	probeWebPods(ctx, cs, from, 3*time.Second, func(name, addr, node, line string, err error) {
		if err != nil {
			fmt.Printf("  -> %-12s %-18s on %s: FAILED: %v\n", name, addr, node, err)
			return
		}
		fmt.Printf("  -> %-12s %-18s on %s: ok, answered %q\n", name, addr, node, line)
	})
	policyConnectivity(ctx, cs, s)
	serviceConnectivity(ctx, cs, s, from)
}

// policyConnectivity shows the sample NetworkPolicy at work: the stranger pod, outside the
// namespaces it admits, gets no answer from the web pods, directly or through any node's
// NodePort.
func policyConnectivity(ctx context.Context, cs kubernetes.Interface, s state) {
	from, ok := s.Pods["demo-other/stranger"]
	if !ok {
		return
	}
	fmt.Printf("\n$ NetworkPolicy demo/%s (TCP, from demo-other/stranger: expected to be blocked)\n", samplePolicy)
	report := func(name, addr, node, line string, err error) {
		if err != nil {
			fmt.Printf("  -> %-12s %-18s on %s: blocked, as the policy says\n", name, addr, node)
			return
		}
		fmt.Printf("  -> %-12s %-18s on %s: NOT BLOCKED, answered %q\n", name, addr, node, line)
	}
	probeWebPods(ctx, cs, from, 2*time.Second, report)
	for _, addr := range nodeIPs(ctx, cs) {
		a := netip.AddrPortFrom(addr, sampleNodePort).String()
		line, err := probeFrom(ctx, from, a, 2*time.Second)
		report("NodePort", a, "the node", line, err)
	}
}

// nodeIPs are the nodes' InternalIP addresses.
func nodeIPs(ctx context.Context, cs kubernetes.Interface) []netip.Addr {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println("  nodes:", err)
		return nil
	}
	var out []netip.Addr
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				out = append(out, ip)
			}
		}
	}
	return out
}

// probeWebPods opens a TCP connection from netns to the http port of each sample web pod and
// hands report the outcome: the answer the workload gave, or the error.
func probeWebPods(ctx context.Context, cs kubernetes.Interface, netns string, timeout time.Duration,
	report func(name, addr, node, line string, err error)) {
	for _, sm := range samples[:2] {
		p, err := cs.CoreV1().Pods(sm.namespace).Get(ctx, sm.name, metav1.GetOptions{})
		if err != nil {
			fmt.Printf("  %s/%s: %v\n", sm.namespace, sm.name, err)
			continue
		}
		addr := netip.AddrPortFrom(netip.MustParseAddr(p.Status.PodIP), samplePort).String()
		line, err := probeFrom(ctx, netns, addr, timeout)
		report(sm.name, addr, p.Spec.NodeName, line, err)
	}
}

// probeFrom asks the netexec server at addr for its host name (GET /hostname) over a
// connection opened inside the network namespace at path netns, and returns the answer.
func probeFrom(ctx context.Context, netns, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			err = harness.InNetns(netns, func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/hostname", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	return strings.TrimSpace(string(body)), err
}

// serviceConnectivity probes the sample Service: its ClusterIP from the client pod, and its
// NodePort on every node from the external host; each line says which web pod answered.
func serviceConnectivity(ctx context.Context, cs kubernetes.Interface, s state, from string) {
	svc, err := cs.CoreV1().Services("demo").Get(ctx, sampleService, metav1.GetOptions{})
	if err != nil {
		fmt.Println("  Service demo/web:", err)
		return
	}
	// Right after `up` the load balancer's flows may still be on their way to the
	// chassis: a probe is retried for a few seconds before it counts as failed.
	try := func(what, netns, addr string) {
		var line string
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := poll.Until(wctx, addr, 500*time.Millisecond, func() (bool, error) {
			var err error
			line, err = probeFrom(wctx, netns, addr, 3*time.Second)
			return err == nil, err
		})
		if err != nil {
			fmt.Printf("  -> %-26s %-18s: FAILED: %v\n", what, addr, err)
			return
		}
		fmt.Printf("  -> %-26s %-18s: ok, answered %q\n", what, addr, line)
	}
	fmt.Printf("\n$ Service demo/web (ClusterIP %s, NodePort %d)\n", svc.Spec.ClusterIP, sampleNodePort)
	for i := 0; i < 3; i++ {
		try("ClusterIP from the client", from, netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), sampleSvcPort).String())
	}
	ext, ok := s.Netns["external"]
	if !ok {
		return
	}
	for _, ip := range nodeIPs(ctx, cs) {
		try("NodePort from external", ext, netip.AddrPortFrom(ip, sampleNodePort).String())
	}
}
