//go:build linux

package e2e

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// Helpers of the Service tests: create Services, probe a VIP from any network namespace
// (a pod's, a node's, the external host's) with TCP, UDP or a raw SCTP INIT, and read the
// Service's load balancer rows as an operator would.

// svcPort is a Service port; target 0 means the same as port.
func svcPort(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
	if target == 0 {
		target = port
	}
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

// newService is a ClusterIP Service in ns selecting app=<selector> (no selector if empty).
func newService(ns, name, selector string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}
	if selector != "" {
		s.Spec.Selector = map[string]string{"app": selector}
	}
	return s
}

// createService creates svc and returns it as the API server completed it (ClusterIP,
// node ports).
func createService(t testing.TB, svc *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := client().CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return got
}

// updateService gets the Service, applies mut and updates it (retrying on conflicts).
func updateService(t *testing.T, ns, name string, mut func(*corev1.Service)) *corev1.Service {
	t.Helper()
	for i := 0; ; i++ {
		s, err := client().CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mut(s)
		got, err := client().CoreV1().Services(ns).Update(t.Context(), s, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if i == 5 {
			t.Fatalf("updating Service %s/%s: %v", ns, name, err)
		}
	}
}

// nodePort returns the node port of the Service's port named name.
func nodePort(t *testing.T, svc *corev1.Service, name string) int32 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			if p.NodePort == 0 {
				t.Fatalf("Service %s/%s port %q has no node port", svc.Namespace, svc.Name, name)
			}
			return p.NodePort
		}
	}
	t.Fatalf("Service %s/%s has no port %q", svc.Namespace, svc.Name, name)
	return 0
}

// workloadPod is a pod whose workload answers on the given container ports.
func workloadPod(ns, name, node, app string, ports ...corev1.ContainerPort) *corev1.Pod {
	p := podSpec(ns, name, node)
	p.Labels = map[string]string{"app": app}
	if len(ports) > 0 {
		p.Spec.Containers[0].Ports = ports
	}
	return p
}

// probeOnce sends one probe of proto ("tcp", "udp", "sctp") from netns to addr and returns
// the answer line.
func probeOnce(ctx context.Context, netns, proto string, addr netip.AddrPort) (string, error) {
	var line string
	err := harness.InNetns(netns, func() error {
		var err error
		switch proto {
		case "tcp":
			line, err = probe.TCP(ctx, addr.String())
		case "udp":
			line, err = probe.UDP(ctx, addr.String())
		case "sctp":
			line, err = probe.SCTPInit(ctx, addr.Addr(), addr.Port())
		default:
			err = fmt.Errorf("unknown protocol %q", proto)
		}
		return err
	})
	return line, err
}

// answer is one parsed answer: which backend, and the client address it saw.
type answer struct {
	backend string
	client  netip.Addr
}

// waitAnswer probes until one answer comes from a backend in want (any backend if want is
// empty) or 30 s pass: the master and ovn-controller need a moment after a change. An
// answer from another backend is not an error while waiting: the Service may still be
// changing.
func waitAnswer(t *testing.T, from, proto string, addr netip.AddrPort, want ...string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got answer
	err := poll.Until(ctx, fmt.Sprintf("%s %s from %s answered by %v", proto, addr, from, want), 200*time.Millisecond, func() (bool, error) {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		line, err := probeOnce(c, from, proto, addr)
		if err != nil {
			return false, err
		}
		name, client, err := probe.ParseLine(line)
		if err != nil {
			return false, err
		}
		got = answer{name, client}
		if len(want) > 0 && !slices.Contains(want, name) {
			return false, fmt.Errorf("answered by %s", name)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// collect makes n probes (after waitAnswer saw the VIP work) and counts answers per backend;
// a probe that fails is an error.
func collect(t *testing.T, from, proto string, addr netip.AddrPort, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		line, err := probeOnce(ctx, from, proto, addr)
		cancel()
		if err != nil {
			t.Errorf("probe %d of %d: %v", i+1, n, err)
			continue
		}
		name, _, err := probe.ParseLine(line)
		if err != nil {
			t.Error(err)
			continue
		}
		seen[name]++
	}
	return seen
}

// expectSpread probes until every backend in want has answered (and no other), or fails
// after 30 s.
func expectSpread(t *testing.T, from, proto string, addr netip.AddrPort, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	err := poll.Until(ctx, fmt.Sprintf("%s %s from %s answered by each of %v", proto, addr, from, want), 50*time.Millisecond, func() (bool, error) {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		line, err := probeOnce(c, from, proto, addr)
		if err != nil {
			return false, err
		}
		name, _, err := probe.ParseLine(line)
		if err != nil {
			return false, err
		}
		if !slices.Contains(want, name) {
			return false, fmt.Errorf("answered by %s, not one of %v", name, want)
		}
		seen[name] = true
		return len(seen) == len(want), fmt.Errorf("seen %v", seen)
	})
	if err != nil {
		t.Error(err)
	}
}

// expectNoAnswer checks that none of a few probes gets an answer within a short time.
func expectNoAnswer(t *testing.T, from, proto string, addr netip.AddrPort) {
	t.Helper()
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		line, err := probeOnce(ctx, from, proto, addr)
		cancel()
		if err == nil {
			t.Errorf("%s %s from %s: answered %q, want no answer", proto, addr, from, line)
			return
		}
	}
}

// expectRefused checks that a TCP connection is refused (a reset) rather than left hanging.
func expectRefused(t *testing.T, from string, addr netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := poll.Until(ctx, fmt.Sprintf("TCP %s from %s refused", addr, from), 200*time.Millisecond, func() (bool, error) {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		line, err := probeOnce(c, from, "tcp", addr)
		if err == nil {
			return false, fmt.Errorf("answered %q", line)
		}
		return errors.Is(err, syscall.ECONNREFUSED), err
	})
	if err != nil {
		t.Error(err)
	}
}

func addrPort(ip string, port int32) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port))
}

// lbRow is a load balancer row of a Service as ovn-nbctl lists it.
type lbRow struct {
	name, role, scope, vips string
}

// serviceLBs lists the Load_Balancer rows owned by Service ns/name.
func serviceLBs(t *testing.T, ns, name string) []lbRow {
	t.Helper()
	out, err := cl.Central.NBCtl(context.Background(), "--format=csv", "--data=bare", "--no-headings",
		"--columns=name,external_ids,vips", "list", "Load_Balancer")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []lbRow
	for _, rec := range recs {
		ids := map[string]string{}
		for _, kv := range strings.Fields(rec[1]) {
			k, v, _ := strings.Cut(kv, "=")
			ids[k] = v
		}
		if ids[nb.KindKey] == string(nb.Service) && ids[nb.NameKey] == ns+"/"+name {
			rows = append(rows, lbRow{rec[0], ids[nb.RoleKey], ids[nb.ScopeKey], rec[2]})
		}
	}
	return rows
}

// waitLBs waits until the Service's load balancer rows satisfy ok.
func waitLBs(t *testing.T, ns, name, what string, ok func([]lbRow) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows []lbRow
	err := poll.Until(ctx, "load balancers of "+ns+"/"+name+": "+what, 200*time.Millisecond, func() (bool, error) {
		rows = serviceLBs(t, ns, name)
		return ok(rows), nil
	})
	if err != nil {
		t.Errorf("%v; rows: %+v", err, rows)
	}
}

// externalRoute routes ip/32 on the external host via a node's IP (as a router in front of
// the cluster would for an externalIP or a load balancer's ingress IP) until the test ends.
func externalRoute(t *testing.T, ip, via string) {
	t.Helper()
	ctx := context.Background()
	if _, err := harness.Exec(ctx, cl.External.Netns, "ip", "route", "replace", ip+"/32", "via", via); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { harness.Exec(context.Background(), cl.External.Netns, "ip", "route", "del", ip+"/32") })
}

// epSlice is a hand-written EndpointSlice of Service svc (not managed by the controller).
func epSlice(ns, name, svc string, port int32, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	proto := corev1.ProtocolTCP
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discovery.LabelServiceName: svc, discovery.LabelManagedBy: "e2e.ovn-transparent.io",
		}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discovery.EndpointPort{{Name: new(string), Port: &port, Protocol: &proto}},
	}
}

// endpoint is an endpoint of pod with the given conditions (nil: unset).
func endpoint(pod *corev1.Pod, ready, serving, terminating *bool) discovery.Endpoint {
	node := pod.Spec.NodeName
	return discovery.Endpoint{Addresses: []string{pod.Status.PodIP}, NodeName: &node,
		Conditions: discovery.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
}

func nodeIPs() []string {
	var ips []string
	for _, n := range []string{"node1", "node2"} {
		ips = append(ips, cl.Node(n).IP)
	}
	return ips
}
