//go:build linux

package controller

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
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// masterPod waits until the pod's annotation and port are the master's: one address of
// subnet, the MAC derived from it, the port carrying the same.
func (e *env) masterPod(ns, name string, subnet netip.Prefix) testPod {
	e.t.Helper()
	var pn contract.PodNetwork
	e.eventually(fmt.Sprintf("master's annotation on %s/%s", ns, name), func() (bool, string) {
		a := e.podAnnotation(ns, name)
		var err error
		pn, err = contract.ParsePodNetwork(a)
		return err == nil && len(pn.IPs) == 1 && pn.IPs[0].Masked() == subnet &&
			pn.MAC.String() == contract.MACFromIP(pn.IPs[0].Addr()).String(), a
	})
	want := pn.MAC.String() + " " + pn.IPs[0].Addr().String()
	e.eventually("port "+contract.PodPort(ns, name)+" on "+want, func() (bool, string) {
		got := e.nbctl("--bare", "--columns=addresses", "find", "logical_switch_port", "name="+contract.PodPort(ns, name))
		return got == want, got
	})
	return testPod{ns: ns, name: name, ip: pn.IPs[0].Addr(), mac: pn.MAC.String(), gwMAC: contract.MACFromIP(pn.Gateways[0]).String()}
}

// TestPodNetworkNotTrusted plays the tenant of the security audit's C2 against a real API
// server, NB and northd, and judges the result with ovn-trace: (b) a forged annotation's
// addresses no longer break or widen another namespace's policy, and (c) after a master
// restart a tenant whose annotation names a victim's address and MAC cannot send as the
// victim.
func TestPodNetworkNotTrusted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	m := e.startMaster(cfg)
	e.createNode("node1", nil)
	subnet := e.nodeSubnet("node1")
	for _, ns := range []string{"prod", "mon", "tenant"} {
		e.createNamespace(ns, nil)
	}
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080}

	// tenant/evil exists first: the oldest pod, which the old rebuild preferred.
	evil := e.createLabelledPod("tenant", "evil", "node1", map[string]string{"app": "evil"})
	api := e.createLabelledPod("prod", "api", "node1", map[string]string{"app": "api"}, http)
	scraper := e.createLabelledPod("mon", "scraper", "node1", map[string]string{"app": "scraper"})
	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "api-from-scrapers"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "api"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("app", "scraper")}}}}},
	})
	e.expect("a scraper reaches the api", scraper, api, "tcp", 8080, true)
	e.expect("evil is no scraper", evil, api, "tcp", 8080, false)

	t.Run("forged addresses stay out of other namespaces' policies", func(t *testing.T) {
		e := e.in(t)
		forged := contract.PodNetworkInfo{IPAddresses: []string{"203.0.113.66/24", "fd00::66/64"}, MACAddress: "0a:58:cb:00:71:42",
			GatewayIPs: []string{"203.0.113.1", "fd00::1"}}
		v, err := forged.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		e.createPod("tenant", "forged", "node1", map[string]string{contract.PodNetworkKey: v})
		e.labelPod("tenant", "forged", `{"app":"scraper"}`)
		// The peer's address set takes in the forged pod (with whichever address).
		e.eventually("the forged pod in the peer's address set", func() (bool, string) {
			sets := e.nbctl("--bare", "--columns=addresses", "list", "address_set")
			return len(strings.Fields(sets)) >= 2, sets
		})
		// The legitimate scraper still passes (an IPv6 address in the set broke the allow
		// flows), and no forged address is in any set.
		e.expect("the scraper still reaches the api", scraper, api, "tcp", 8080, true)
		sets := e.nbctl("--bare", "--columns=addresses", "list", "address_set")
		for _, bad := range []string{"203.0.113.66", "fd00::66"} {
			if strings.Contains(sets, bad) {
				t.Errorf("an address set holds the forged %s: %s", bad, sets)
			}
		}
		// The forged pod passes as the scraper it is, with the address the master gave it.
		f := e.masterPod("tenant", "forged", subnet)
		e.expect("the forged pod, with its own address", f, api, "tcp", 8080, true)
	})

	t.Run("no takeover of a victim's address across a restart", func(t *testing.T) {
		e := e.in(t)
		victim := e.createLabelledPod("prod", "victim", "node1", map[string]string{"app": "scraper"})
		e.expect("the victim reaches the api", victim, api, "tcp", 8080, true)
		m.stop()
		patch, err := annotationPatch("", contract.PodNetworkKey, e.podAnnotation("prod", "victim"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.kube.CoreV1().Pods("tenant").Patch(e.ctx, "evil", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.startMaster(cfg)
		for _, p := range []testPod{evil, victim} {
			e.eventually(fmt.Sprintf("%s/%s annotated and on its port with its own %s", p.ns, p.name, p.ip), func() (bool, string) {
				a := e.podAnnotation(p.ns, p.name)
				port := e.nbctl("--bare", "--columns=addresses", "find", "logical_switch_port", "name="+contract.PodPort(p.ns, p.name))
				return annotated(a, p.ip) && port == p.mac+" "+p.ip.String(), a + " / " + port
			})
		}
		e.waitEvent("evil", ReasonPodNetworkOverwritten)
		// Sent from evil's port with the victim's MAC and address: port security drops it.
		spoof := testPod{ns: "tenant", name: "evil", ip: victim.ip, mac: victim.mac, gwMAC: victim.gwMAC}
		if ok, out := e.conn("new", nil, contract.PodPort("tenant", "evil"), spoof.mac, spoof.ip, api.mac, api.ip, "tcp", 40000, 8080,
			contract.PodPort("prod", "api")); ok {
			t.Errorf("evil's port sends as the victim and reaches the api:\n%s", out)
		}
		e.expect("the victim still reaches the api", victim, api, "tcp", 8080, true)
	})
}
