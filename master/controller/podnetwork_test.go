package controller

// The pod-network annotation is written by the master, but anyone who may create or patch a
// pod can write it too (security audit, C2). These fast-tier tests play that user: the
// master must decide every pod address itself, never take a MAC from the annotation, put
// only addresses it allocated into NetworkPolicy address sets, and keep an address with the
// pod whose port already holds it across a restart.

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// node1Subnet is the subnet the tests' node1 is annotated with.
const node1Subnet = "10.244.0.0/24"

func subnetNode(name, subnet string) *corev1.Node {
	return kubetest.Node(name, map[string]string{contract.NodeSubnetKey: subnet})
}

// forgedNetwork is a pod-network annotation a user wrote: any IPs and MAC.
func forgedNetwork(t *testing.T, mac string, ips ...string) string {
	t.Helper()
	info := contract.PodNetworkInfo{IPAddresses: ips, MACAddress: mac}
	for _, ip := range ips {
		p := netip.MustParsePrefix(ip)
		info.GatewayIPs = append(info.GatewayIPs, p.Masked().Addr().Next().String())
	}
	v, err := info.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// portAddress returns the MAC and IP of a pod port (one "MAC IP" entry).
func portAddress(t *testing.T, lsp *nbdb.LogicalSwitchPort) (string, netip.Addr) {
	t.Helper()
	if len(lsp.Addresses) != 1 {
		t.Fatalf("port %s addresses %q, want one", lsp.Name, lsp.Addresses)
	}
	f := strings.Fields(lsp.Addresses[0])
	if len(f) != 2 {
		t.Fatalf("port %s address %q is not \"MAC IP\"", lsp.Name, lsp.Addresses[0])
	}
	return f[0], netip.MustParseAddr(f[1])
}

// checkMasterPort fails unless a pod port's MAC is the one derived from its IP, with
// port_security the same.
func checkMasterPort(t *testing.T, lsp *nbdb.LogicalSwitchPort) netip.Addr {
	t.Helper()
	mac, ip := portAddress(t, lsp)
	if want := contract.MACFromIP(ip).String(); mac != want {
		t.Errorf("port %s has MAC %s, want %s derived from its IP %s", lsp.Name, mac, want, ip)
	}
	if !slices.Equal(lsp.PortSecurity, lsp.Addresses) {
		t.Errorf("port %s port_security %q differs from addresses %q", lsp.Name, lsp.PortSecurity, lsp.Addresses)
	}
	return ip
}

func (e *unitEnv) pod(ns, name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// setPodNetwork writes a pod-network annotation as a user would.
func (e *unitEnv) setPodNetwork(ns, name, value string) {
	e.t.Helper()
	patch, err := annotationPatch("", contract.PodNetworkKey, value)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Pods(ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitMasterAnnotation waits until the pod's annotation is the one the master writes for ip.
func (e *unitEnv) waitMasterAnnotation(ns, name string, ip netip.Addr) {
	e.t.Helper()
	want := fmt.Sprintf("%s %s", contract.MACFromIP(ip), ip)
	kubetest.Eventually(e.t, fmt.Sprintf("annotation of %s/%s back to %s", ns, name, want), func() (bool, string) {
		a := e.pod(ns, name).Annotations[contract.PodNetworkKey]
		pn, err := contract.ParsePodNetwork(a)
		if err != nil {
			return false, a
		}
		return len(pn.IPs) == 1 && fmt.Sprintf("%s %s", pn.MAC, pn.IPs[0].Addr()) == want, a
	})
}

// annotated reports whether value is the annotation the master writes for ip.
func annotated(value string, ip netip.Addr) bool {
	pn, err := contract.ParsePodNetwork(value)
	return err == nil && len(pn.IPs) == 1 && pn.IPs[0].Addr() == ip && pn.MAC.String() == contract.MACFromIP(ip).String()
}

// C2 (a): a pod created with an annotation naming the gateway's MAC and an address of its
// choosing gets a port with the master's address and the MAC derived from it; the master
// overwrites the annotation and says so in an Event naming the pod.
func TestUnitForgedAnnotationOnNewPod(t *testing.T) {
	evil := kubetest.Pod("tenant", "evil", "node1", nil)
	routerMAC := contract.MACFromIP(netip.MustParseAddr("10.244.0.1")).String()
	evil.Annotations = map[string]string{contract.PodNetworkKey: forgedNetwork(t, routerMAC, "10.244.0.200/24")}
	e := startUnit(t, testConfig("10.244.0.0/16"), subnetNode("node1", node1Subnet), evil)

	lsp := waitRow(e, "port of tenant/evil", lspNamed(contract.PodPort("tenant", "evil")))
	ip := checkMasterPort(t, lsp)
	if ip == netip.MustParseAddr("10.244.0.200") {
		t.Errorf("the pod got the address its own annotation asked for, %s", ip)
	}
	for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
		for _, a := range p.Addresses {
			if p.Name != contract.NodeSwitchRouterPort("node1") && strings.Contains(a, routerMAC) {
				t.Errorf("port %s carries the router port's MAC: %q", p.Name, a)
			}
		}
	}
	e.waitMasterAnnotation("tenant", "evil", ip)
	e.events.WaitEvent(t, "tenant/evil", ReasonPodNetworkOverwritten)
}

// C2 (a): a user who rewrites the annotation of a running pod (another MAC, another free
// address) changes neither its port nor, for long, its annotation.
func TestUnitForgedAnnotationOnRunningPod(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"), subnetNode("node1", node1Subnet), kubetest.Pod("tenant", "web", "node1", nil))
	lsp := waitRow(e, "port of tenant/web", lspNamed(contract.PodPort("tenant", "web")))
	ip := checkMasterPort(t, lsp)
	e.waitMasterAnnotation("tenant", "web", ip)

	e.setPodNetwork("tenant", "web", forgedNetwork(t, "0a:58:0a:f4:00:01", "10.244.0.77/24"))
	e.waitMasterAnnotation("tenant", "web", ip)
	lsp = waitRow(e, "port of tenant/web", lspNamed(contract.PodPort("tenant", "web")))
	if got := checkMasterPort(t, lsp); got != ip {
		t.Errorf("port moved from %s to %s after the user rewrote the annotation", ip, got)
	}
	e.events.WaitEvent(t, "tenant/web", ReasonPodNetworkOverwritten)
}

// C2 (b): a pod selected by another namespace's policy peer puts only the address the master
// gave it into the peer's address set: not its annotation's, not an unverified
// status.podIPs, no IPv6 address in an IPv4 set.
func TestUnitPeerAddressSetHoldsOnlyMasterAddresses(t *testing.T) {
	scraper := kubetest.Pod("mon", "scraper", "node1", map[string]string{"app": "scraper"})
	forged := kubetest.Pod("tenant", "forged", "node1", map[string]string{"app": "scraper"})
	forged.Annotations = map[string]string{contract.PodNetworkKey: forgedNetwork(t, "0a:58:cb:00:71:42", "203.0.113.66/24", "fd00::66/64")}
	status := kubetest.Pod("tenant", "status", "node1", map[string]string{"app": "scraper"})
	status.Status.PodIPs = []corev1.PodIP{{IP: "198.51.100.7"}}
	status.Status.PodIP = "198.51.100.7"
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "scrape"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "scraper"}}}}}},
		},
	}
	e := startUnit(t, testConfig("10.244.0.0/16"),
		kubetest.Namespace("prod", nil), kubetest.Namespace("mon", nil), kubetest.Namespace("tenant", nil),
		subnetNode("node1", node1Subnet), kubetest.Pod("prod", "api", "node1", map[string]string{"app": "api"}),
		scraper, forged, status, pol)

	ports := []string{contract.PodPort("mon", "scraper"), contract.PodPort("tenant", "status")}
	var want []string
	for _, p := range ports {
		want = append(want, checkMasterPort(t, waitRow(e, "port "+p, lspNamed(p))).String())
	}
	// Every pod port's address is the master's: the set may hold those and nothing else.
	allocated := func() []string {
		var out []string
		for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
			if p.ExternalIDs[nb.RoleKey] == string(nb.PodPort) {
				_, ip := portAddress(t, p)
				out = append(out, ip.String())
			}
		}
		return out
	}
	kubetest.Eventually(t, fmt.Sprintf("the peer's address set holds %v and only pod ports' addresses", want), func() (bool, string) {
		sets := unitRows[*nbdb.AddressSet](e)
		if len(sets) != 1 {
			return false, fmt.Sprintf("%d address sets: %+v", len(sets), sets)
		}
		ok := true
		for _, a := range want {
			ok = ok && slices.Contains(sets[0].Addresses, a)
		}
		mine := allocated()
		for _, a := range sets[0].Addresses {
			ok = ok && slices.Contains(mine, a)
		}
		return ok, fmt.Sprintf("set %v, pod ports %v", sets[0].Addresses, mine)
	})
	// The forged pod gets a port of the master's choosing, and joins the set with it.
	forgedIP := checkMasterPort(t, waitRow(e, "port of tenant/forged", lspNamed(contract.PodPort("tenant", "forged"))))
	waitRow(e, "the forged pod in the set with the master's address", func(s *nbdb.AddressSet) bool {
		return slices.Contains(s.Addresses, forgedIP.String())
	})
	// And it stays so: the pods' later events (the annotation the master rewrote) change nothing.
	time.Sleep(200 * time.Millisecond)
	mine := allocated()
	for _, s := range unitRows[*nbdb.AddressSet](e) {
		for _, a := range s.Addresses {
			if !slices.Contains(mine, a) {
				t.Errorf("address set %s holds %s, which the master never allocated", s.Name, a)
			}
		}
	}
}

// C2 (c): evil, the older pod, has its annotation rewritten to the victim's address and MAC
// while no master runs. The restarted master keeps the address with the victim, whose port
// in NB holds it, gives evil its own address back, and overwrites evil's annotation.
func TestUnitRestartKeepsAddressWithItsPort(t *testing.T) {
	evil := kubetest.Pod("tenant", "evil", "node1", nil)
	evil.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	e := startUnit(t, testConfig("10.244.0.0/16"), subnetNode("node1", node1Subnet), evil)
	evilIP := checkMasterPort(t, waitRow(e, "port of tenant/evil", lspNamed(contract.PodPort("tenant", "evil"))))
	victim := kubetest.Pod("prod", "victim", "node1", nil)
	victim.CreationTimestamp = metav1.Now()
	e.create(victim)
	victimIP := checkMasterPort(t, waitRow(e, "port of prod/victim", lspNamed(contract.PodPort("prod", "victim"))))
	e.waitMasterAnnotation("prod", "victim", victimIP)
	e.waitMasterAnnotation("tenant", "evil", evilIP)

	e.stop()
	victimNet := e.pod("prod", "victim").Annotations[contract.PodNetworkKey]
	e.setPodNetwork("tenant", "evil", victimNet)
	e.startMaster()

	// Converged when both annotations are the master's and each port is on its pod's own address.
	kubetest.Eventually(t, "every pod port and annotation on the pod's own address", func() (bool, string) {
		ports := map[string]netip.Addr{}
		for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
			if p.Name == contract.PodPort("tenant", "evil") || p.Name == contract.PodPort("prod", "victim") {
				_, ports[p.Name] = portAddress(t, p)
			}
		}
		evilNet := e.pod("tenant", "evil").Annotations[contract.PodNetworkKey]
		victimNet := e.pod("prod", "victim").Annotations[contract.PodNetworkKey]
		return ports[contract.PodPort("tenant", "evil")] == evilIP && ports[contract.PodPort("prod", "victim")] == victimIP &&
				annotated(evilNet, evilIP) && annotated(victimNet, victimIP),
			fmt.Sprintf("ports %v; annotations evil %s victim %s; evil had %s, victim %s", ports, evilNet, victimNet, evilIP, victimIP)
	})
	e.events.WaitEvent(t, "tenant/evil", ReasonPodNetworkOverwritten)
	for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
		if strings.HasSuffix(p.Name, "_evil") || strings.HasSuffix(p.Name, "_victim") {
			checkMasterPort(t, p)
		}
	}
}

// M3: a pod's port may be bound only by its own node's chassis (requested-chassis, the
// hostname the node agent registers: its node name) and only to the interface of this
// incarnation of the pod (iface-id-ver, the UID the agent writes on the interface).
func TestUnitPodPortBinding(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"), subnetNode("node1", node1Subnet), kubetest.Pod("ns1", "web", "node1", nil))
	lsp := waitRow(e, "port of ns1/web", lspNamed(contract.PodPort("ns1", "web")))
	want := map[string]string{"requested-chassis": contract.ChassisHostname("node1"), contract.IfaceIDVer: "uid-pod-ns1-web"}
	if !maps.Equal(lsp.Options, want) {
		t.Errorf("pod port options %v, want %v", lsp.Options, want)
	}
	if got := lsp.ExternalIDs[contract.PodUIDKey]; got != "uid-pod-ns1-web" {
		t.Errorf("pod port %s=%q, want the pod's UID", contract.PodUIDKey, got)
	}
}
