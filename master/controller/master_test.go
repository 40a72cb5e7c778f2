//go:build linux

package controller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// TestMaster runs the master against a real API server and a real NB/northd through the life
// of a small cluster: nodes, pods, pod churn, a master restart, an NB reconnection and a node
// deletion. Each step checks the state the master leaves, with ovn-nbctl and ovn-trace.
func TestMaster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	m := e.startMaster(cfg)
	e.createNode("node1", chassisOf(1))
	e.createNode("node2", chassisOf(2))
	subnets := map[string]netip.Prefix{"node1": e.nodeSubnet("node1"), "node2": e.nodeSubnet("node2")}

	e.checkNodeTopology(subnets)
	ips := e.checkPods(subnets)
	e.checkPodChurn(subnets, ips)
	m = e.checkRestart(m, cfg, subnets)
	e.checkReconnect(m)
	e.checkNodeDeletion(subnets)
}

// checkNodeTopology: (a) two nodes with chassis give the full shared-gateway topology.
func (e *env) checkNodeTopology(subnets map[string]netip.Prefix) {
	e.t.Helper()
	e.eventually("both gateway routers", func() (bool, string) {
		out := e.nbctl("show")
		return strings.Contains(out, "router-port: rtoe-GR_node2") && strings.Contains(out, "breth0_node2"), out
	})
	if subnets["node1"] == subnets["node2"] || !netip.MustParsePrefix("10.244.0.0/16").Contains(subnets["node1"].Addr()) {
		e.t.Fatalf("node subnets %v", subnets)
	}
	wantSet(e.t, "routers", e.names("logical_router"), "GR_node1", "GR_node2", "ovn_cluster_router")
	wantSet(e.t, "switches", e.names("logical_switch"), "ext_node1", "ext_node2", "join", "node1", "node2")
	for i, node := range []string{"node1", "node2"} {
		gr := "GR_" + node
		// ovn-nbctl quotes a value only when it could be read as something else.
		get := func(args ...string) string { return strings.Trim(e.nbctl(append([]string{"get"}, args...)...), `"`) }
		for got, want := range map[string]string{
			get("logical_switch", node, "other_config:subnet"):         subnets[node].String(),
			get("logical_router", gr, "options:chassis"):               fmt.Sprintf("chassis-%d", i+1),
			get("logical_router", gr, "options:lb_force_snat_ip"):      "router_ip",
			get("logical_router", gr, "options:dynamic_neigh_routers"): "true",
			get("logical_switch_port", "breth0_"+node, "options"):      "{network_name=physnet}",
			e.nbctl("lsp-get-type", "breth0_"+node):                    "localnet",
		} {
			if got != want {
				e.t.Errorf("%s: got %s, want %s", node, got, want)
			}
		}
		wantSet(e.t, "ports of ext_"+node, portNames(e.nbctl("lsp-list", "ext_"+node)), "breth0_"+node, "etor-"+gr)
		wantSet(e.t, "ports of "+node, portNames(e.nbctl("lsp-list", node)), "k8s-"+node, "stor-"+node)
		if nat := e.nbctl("lr-nat-list", gr); !containsFields(nat, "snat", fmt.Sprintf("172.18.0.%d", i+1), "10.244.0.0/16") {
			e.t.Errorf("%s NAT:\n%s", gr, nat)
		}
		routes := e.nbctl("lr-route-list", gr)
		if !containsFields(routes, "10.244.0.0/16", "100.64.0.1") || !containsFields(routes, "0.0.0.0/0", "172.18.0.254", "rtoe-"+gr) {
			e.t.Errorf("%s routes:\n%s", gr, routes)
		}
		joinIP := strings.Trim(strings.Split(e.nbctl("get", "logical_router_port", "rtoj-"+gr, "networks"), "/")[0], `["`)
		cr := e.nbctl("lr-route-list", "ovn_cluster_router")
		if !containsFields(cr, subnets[node].String(), joinIP, "src-ip") || !containsFields(cr, joinIP, "dst-ip") {
			e.t.Errorf("cluster router routes for %s (join IP %s):\n%s", node, joinIP, cr)
		}
	}
	e.checkEveryRowOwned()
}

// checkEveryRowOwned: every row of the tables the master writes carries its owner marks.
func (e *env) checkEveryRowOwned() {
	e.t.Helper()
	for _, table := range nb.TableNames() {
		if nb.Unmarked(table) {
			continue // no external_ids column: owned by name
		}
		for _, line := range e.lines("--format=csv", "--data=bare", "--no-headings", "--columns=_uuid,external_ids", "list", table) {
			for _, key := range []string{nb.KindKey, nb.NameKey, nb.RoleKey} {
				if !strings.Contains(line, key+"=") {
					e.t.Errorf("%s row without %s: %s", table, key, line)
				}
			}
		}
	}
}

// checkPods: (b) pods on both nodes get distinct addresses in their node's subnet and ports
// that forward between them, and port security drops a spoofed source.
func (e *env) checkPods(subnets map[string]netip.Prefix) map[string]netip.Addr {
	e.t.Helper()
	a := e.createPod("default", "a", "node1", nil)
	e.createPod("default", "b", "node2", nil)
	pa, pb := e.podNetwork("default", "a"), e.podNetwork("default", "b")
	ipA, ipB := pa.IPs[0].Addr(), pb.IPs[0].Addr()
	if pa.IPs[0].Masked() != subnets["node1"] || pb.IPs[0].Masked() != subnets["node2"] || ipA == ipB {
		e.t.Fatalf("pod addresses a=%s b=%s, node subnets %v", pa.IPs[0], pb.IPs[0], subnets)
	}
	if pa.MAC.String() != contract.MACFromIP(ipA).String() || pa.Gateways[0] != subnets["node1"].Addr().Next() {
		e.t.Errorf("pod a annotation %+v", pa)
	}
	e.waitPort("default_b", true)
	e.eventually("port default_a", func() (bool, string) {
		got := e.nbctl("--bare", "--columns=addresses,port_security,external_ids", "find", "logical_switch_port", "name=default_a")
		want := pa.MAC.String() + " " + ipA.String()
		return strings.Count(got, want) == 2 && strings.Contains(got, "pod-uid="+string(a.UID)), got
	})
	flow := func(src netip.Addr) string {
		return fmt.Sprintf(`inport == "default_a" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == 8080`,
			pa.MAC, contract.MACFromIP(pa.Gateways[0]), src, ipB)
	}
	if out := e.trace("node1", flow(ipA)); !strings.Contains(out, `output("default_b")`) {
		e.t.Errorf("pod a -> pod b across nodes does not reach default_b:\n%s", out)
	}
	if out := e.trace("node1", flow(ipA.Next().Next().Next())); strings.Contains(out, "output(") {
		e.t.Errorf("a spoofed source address got through port security:\n%s", out)
	}
	return map[string]netip.Addr{"a": ipA, "b": ipB}
}

// checkPodChurn: (c) a deleted pod's port goes and its address is given again; a Succeeded
// pod's too.
func (e *env) checkPodChurn(subnets map[string]netip.Prefix, ips map[string]netip.Addr) {
	e.t.Helper()
	e.deletePod("default", "a")
	e.waitPort("default_a", false)
	e.createPod("default", "c", "node1", nil)
	if got := e.podNetwork("default", "c").IPs[0].Addr(); got != ips["a"] {
		e.t.Errorf("pod c got %s, want the deleted pod a's %s (lowest free)", got, ips["a"])
	}
	e.setPodPhase("default", "b", corev1.PodSucceeded)
	e.waitPort("default_b", false)
	e.createPod("default", "d", "node2", nil)
	if got := e.podNetwork("default", "d").IPs[0].Addr(); got != ips["b"] {
		e.t.Errorf("pod d got %s, want the Succeeded pod b's %s", got, ips["b"])
	}
	e.waitPort("default_c", true)
	e.waitPort("default_d", true)
}

func (e *env) waitPort(name string, present bool) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("port %s present=%v", name, present), func() (bool, string) {
		got := e.nbctl("--bare", "--columns=name", "find", "logical_switch_port", "name="+name)
		return (got != "") == present, got
	})
}

func (e *env) names(table string) []string {
	return e.lines("--bare", "--columns=name", "list", table)
}

func (e *env) lines(args ...string) []string {
	var out []string
	for _, l := range strings.Split(e.nbctl(args...), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// portNames reads `ovn-nbctl lsp-list` ("<uuid> (<name>)" lines).
func portNames(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "("); i >= 0 {
			names = append(names, strings.TrimSuffix(strings.TrimSpace(l[i+1:]), ")"))
		}
	}
	return names
}

// containsFields reports whether some line of out has all fields, in any order.
func containsFields(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		ok := true
		for _, want := range fields {
			ok = ok && slices.Contains(f, want)
		}
		if ok {
			return true
		}
	}
	return false
}

func wantSet(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func (e *env) podAnnotation(ns, name string) string {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Annotations[contract.PodNetworkKey]
}
