package controller

// The fast tier of the controller tests (make test-unit): the real controller, its real
// informers on client-go's fake clientset, and a real NB ovsdb-server in t.TempDir() serving
// the pinned schema. No API server, no northd, no root: each case runs in about a second and
// asserts on the rows the controller leaves in the NB and on the Events it records. The
// scenario tests (env_test.go and the files that use it) run the same controller against a
// real kube-apiserver and check the data path with ovn-trace.

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// unitEnv is one fast test's world: a fake clientset, an NB server, the master running on
// both, and a second NB client that reads what the master wrote (as an operator would).
type unitEnv struct {
	t      *testing.T
	ctx    context.Context
	cfg    Config
	kube   *fake.Clientset
	nbSrv  *ovsdbtest.Server
	reader client.Client
	events *kubetest.Recorder
	// ctrl is the master running now, masterNB its NB client (which reports dropped cache
	// events, as ovnt-master's does).
	ctrl     *Controller
	masterNB client.Client
	// nbProbe is the master's NB inactivity probe (ovsdb.Config.InactivityProbe; zero: the
	// default) from the next startMaster on.
	nbProbe time.Duration
	// stop stops the running master and waits for it.
	stop func()
	// logs, when set, collects the log of the masters started from then on (else t.Log).
	logs *logLines
	// wrapNB, when set, is what the masters started from then on write the NB through,
	// given their NB client; beforeRun, when set, sees each master before it runs.
	wrapNB    func(client.Client) client.Client
	beforeRun func(*Controller)
}

// startUnit starts the master with cfg on a fake clientset holding objs and an empty NB.
func startUnit(t *testing.T, cfg Config, objs ...runtime.Object) *unitEnv {
	t.Helper()
	e := newUnit(t, cfg, objs...)
	e.startMaster()
	return e
}

// newUnit is startUnit without starting the master: the test sets hooks, then calls
// startMaster.
func newUnit(t *testing.T, cfg Config, objs ...runtime.Object) *unitEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &unitEnv{t: t, ctx: ctx, cfg: cfg, kube: fake.NewClientset(objs...), nbSrv: ovsdbtest.Start(t, ovsdbtest.NB),
		events: &kubetest.Recorder{}}
	e.reader = e.connect()
	// northd or `ovn-nbctl init` creates the one NB_Global row; the master counts its
	// insertions to notice a cache refill.
	ops, err := e.reader.Create(&nbdb.NBGlobal{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(ctx, e.reader, ops...); err != nil {
		t.Fatal(err)
	}
	e.stop = func() {}
	t.Cleanup(func() { e.stop() })
	return e
}

// startMaster starts a master (a new process, as far as its state goes) on the env's
// clientset and NB.
func (e *unitEnv) startMaster() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	nbCfg := ovsdb.Config{Remotes: e.nbSrv.Remote, InactivityProbe: e.nbProbe}
	cfg := e.cfg
	cfg.NBOverflow = nb.WatchOverflow(&nbCfg)
	nbc, err := nb.Connect(e.ctx, nbCfg)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(nbc.Close)
	e.masterNB = nbc
	log := testr.New(e.t)
	if e.logs != nil {
		log = e.logs.logger()
	}
	var writer client.Client = nbc
	if e.wrapNB != nil {
		writer = e.wrapNB(nbc)
	}
	ctrl, err := New(cfg, e.kube, writer, e.events, log)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if e.beforeRun != nil {
		e.beforeRun(ctrl)
	}
	e.ctrl = ctrl
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}
}

// restartMaster stops the master and starts a new one: a restart or a leader fail-over.
func (e *unitEnv) restartMaster() {
	e.t.Helper()
	e.stop()
	e.startMaster()
}

func (e *unitEnv) connect() client.Client {
	e.t.Helper()
	c, err := nb.Connect(e.ctx, ovsdb.Config{Remotes: e.nbSrv.Remote})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// unitRows lists the rows of T in the reader's cache.
func unitRows[T model.Model](e *unitEnv) []T {
	e.t.Helper()
	var out []T
	if err := e.reader.List(e.ctx, &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// waitRow waits for the row of T that match accepts and returns it.
func waitRow[T model.Model](e *unitEnv, what string, match func(T) bool) T {
	e.t.Helper()
	var found T
	kubetest.Eventually(e.t, what, func() (bool, string) {
		rows := unitRows[T](e)
		for _, r := range rows {
			if match(r) {
				found = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d rows: %+v", len(rows), rows)
	})
	return found
}

// waitNoRow waits until no row of T matches.
func waitNoRow[T model.Model](e *unitEnv, what string, match func(T) bool) {
	e.t.Helper()
	kubetest.Eventually(e.t, what, func() (bool, string) {
		for _, r := range unitRows[T](e) {
			if match(r) {
				return false, fmt.Sprintf("still there: %+v", r)
			}
		}
		return true, ""
	})
}

func (e *unitEnv) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *unitEnv) waitNodeSubnet(name string) netip.Prefix {
	e.t.Helper()
	var p netip.Prefix
	kubetest.Eventually(e.t, "subnet annotation of node "+name, func() (bool, string) {
		n := e.node(name)
		var err error
		p, err = contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
		return err == nil, fmt.Sprint(n.Annotations)
	})
	return p
}

func (e *unitEnv) create(obj runtime.Object) {
	e.t.Helper()
	if err := e.kube.Tracker().Add(obj); err != nil {
		e.t.Fatal(err)
	}
}

func lsNamed(name string) func(*nbdb.LogicalSwitch) bool {
	return func(r *nbdb.LogicalSwitch) bool { return r.Name == name }
}

func lspNamed(name string) func(*nbdb.LogicalSwitchPort) bool {
	return func(r *nbdb.LogicalSwitchPort) bool { return r.Name == name }
}

func TestUnitNodesAndPods(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	e := startUnit(t, cfg, kubetest.Node("node1", nil), kubetest.Pod("ns1", "web", "node1", nil))

	t.Run("node switch, router port and management port", func(t *testing.T) {
		subnet := e.waitNodeSubnet("node1")
		ls := waitRow(e, "switch node1", lsNamed("node1"))
		if ls.OtherConfig["subnet"] != subnet.String() {
			t.Errorf("switch node1 remembers subnet %q, the annotation says %s", ls.OtherConfig["subnet"], subnet)
		}
		mgmt := waitRow(e, "management port", lspNamed(contract.ManagementPort("node1")))
		want := contract.MACFromIP(contract.ManagementIP(subnet)).String() + " " + contract.ManagementIP(subnet).String()
		if !slices.Equal(mgmt.Addresses, []string{want}) {
			t.Errorf("management port addresses %q, want %q", mgmt.Addresses, want)
		}
		waitRow(e, "router port rtos-node1", func(r *nbdb.LogicalRouterPort) bool { return r.Name == contract.NodeRouterPort("node1") })
	})

	t.Run("pod port matches the pod annotation", func(t *testing.T) {
		subnet := e.waitNodeSubnet("node1")
		var pn contract.PodNetwork
		kubetest.Eventually(t, "pod-network annotation of ns1/web", func() (bool, string) {
			p, err := e.kube.CoreV1().Pods("ns1").Get(e.ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pn, err = contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey])
			return err == nil, fmt.Sprint(p.Annotations)
		})
		if len(pn.IPs) != 1 || pn.IPs[0].Masked() != subnet {
			t.Fatalf("pod addresses %v not one address of the node subnet %s", pn.IPs, subnet)
		}
		lsp := waitRow(e, "pod port", lspNamed(contract.PodPort("ns1", "web")))
		want := pn.MAC.String() + " " + pn.IPs[0].Addr().String()
		if !slices.Equal(lsp.Addresses, []string{want}) || !slices.Equal(lsp.PortSecurity, []string{want}) {
			t.Errorf("pod port addresses %q port_security %q, want %q", lsp.Addresses, lsp.PortSecurity, want)
		}
	})

	t.Run("a deleted pod's port goes", func(t *testing.T) {
		if err := e.kube.CoreV1().Pods("ns1").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNoRow(e, "pod port deleted", lspNamed(contract.PodPort("ns1", "web")))
	})
}

// The cluster CIDR holds two node subnets: the third node waits, with an Event, until a node
// is deleted, and then gets the freed subnet.
func TestUnitSubnetFreedByDeletedNode(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/23"), kubetest.Node("node1", nil), kubetest.Node("node2", nil))
	s1 := e.waitNodeSubnet("node1")
	e.waitNodeSubnet("node2")
	e.create(kubetest.Node("node3", nil))
	ev := e.events.WaitEvent(t, "node3", ReasonSubnetExhausted)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %+v is not a warning", ev)
	}
	if _, has := e.node("node3").Annotations[contract.NodeSubnetKey]; has {
		t.Fatal("node3 has a subnet annotation although the cluster CIDR is full")
	}
	if err := e.kube.CoreV1().Nodes().Delete(e.ctx, "node1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoRow(e, "switch node1 deleted", lsNamed("node1"))
	if got := e.waitNodeSubnet("node3"); got != s1 {
		t.Errorf("node3 got subnet %s, want node1's freed %s", got, s1)
	}
	waitRow(e, "switch node3", lsNamed("node3"))
}

func TestUnitBadInputEvents(t *testing.T) {
	badPod := kubetest.Pod("ns1", "bad", "node1", nil)
	badPod.Annotations = map[string]string{contract.PodNetworkKey: "{not json"}
	e := startUnit(t, testConfig("10.244.0.0/16"),
		kubetest.Node("node1", nil),
		kubetest.Node("node2", map[string]string{contract.NodeSubnetKey: "10.99.0.0/24"}), // outside the cluster CIDR
		badPod,
		kubetest.Pod("ns1", "lost", "nowhere", nil),
		kubetest.Pod("breth0", "node1", "node1", nil),
	)
	t.Run("node subnet outside the cluster CIDR is replaced", func(t *testing.T) {
		e.events.WaitEvent(t, "node2", ReasonInvalidNodeSubnet)
		if got := e.waitNodeSubnetOtherThan("node2", "10.99.0.0/24"); !netip.MustParsePrefix("10.244.0.0/16").Contains(got.Addr()) {
			t.Errorf("node2 got subnet %s outside the cluster CIDR", got)
		}
	})
	t.Run("malformed pod-network annotation", func(t *testing.T) {
		e.events.WaitEvent(t, "ns1/bad", ReasonInvalidPodNetwork)
	})
	t.Run("pod bound to an unknown node", func(t *testing.T) {
		e.events.WaitEvent(t, "ns1/lost", ReasonUnknownNode)
	})
	t.Run("pod named like node1's localnet port", func(t *testing.T) {
		e.events.WaitEvent(t, "breth0/node1", ReasonReservedNamespace)
		if a := e.pod("breth0", "node1").Annotations[contract.PodNetworkKey]; a != "" {
			t.Errorf("pod in the reserved namespace got an address: %s", a)
		}
	})
	t.Run("good objects are not held up by bad ones", func(t *testing.T) {
		waitRow(e, "switch node1", lsNamed("node1"))
		waitRow(e, "switch node2", lsNamed("node2"))
	})
}

func (e *unitEnv) waitNodeSubnetOtherThan(name, old string) netip.Prefix {
	e.t.Helper()
	var p netip.Prefix
	kubetest.Eventually(e.t, "a new subnet for node "+name, func() (bool, string) {
		a := e.node(name).Annotations[contract.NodeSubnetKey]
		var err error
		p, err = contract.ParseNodeSubnet(a)
		return err == nil && a != old, a
	})
	return p
}

func TestUnitServiceLoadBalancer(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns1", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	e := startUnit(t, testConfig("10.244.0.0/16"), kubetest.Node("node1", nil), svc, slice)
	name := "Service_ns1/web_TCP_cluster"
	lb := waitRow(e, "cluster load balancer", func(r *nbdb.LoadBalancer) bool { return r.Name == name })
	if want := map[string]string{"10.96.0.10:80": "10.244.0.5:8080"}; !maps.Equal(lb.Vips, want) {
		t.Errorf("vips %v, want %v", lb.Vips, want)
	}
	groups := unitRows[*nbdb.LoadBalancerGroup](e)
	if len(groups) != 1 || !slices.Contains(groups[0].LoadBalancer, lb.UUID) {
		t.Errorf("the load balancer is not in the cluster group: %+v", groups)
	}

	t.Run("endpoint change updates the VIP", func(t *testing.T) {
		slice = slice.DeepCopy()
		slice.Endpoints[0].Addresses = []string{"10.244.0.6"}
		if _, err := e.kube.DiscoveryV1().EndpointSlices("ns1").Update(e.ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRow(e, "new backend", func(r *nbdb.LoadBalancer) bool {
			return r.Name == name && r.Vips["10.96.0.10:80"] == "10.244.0.6:8080"
		})
	})
	t.Run("deleted Service", func(t *testing.T) {
		if err := e.kube.CoreV1().Services("ns1").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNoRow(e, "load balancer deleted", func(r *nbdb.LoadBalancer) bool { return r.Name == name })
	})
}

// A policy's port group holds the ports of the pods it selects; a label change of another pod
// fans out to the port group, and the policy's ACLs hang on it.
func TestUnitNetworkPolicy(t *testing.T) {
	web := kubetest.Pod("ns1", "web", "node1", map[string]string{"app": "web"})
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	other := kubetest.Pod("ns1", "other", "node1", map[string]string{"app": "other"})
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}},
		},
	}
	e := startUnit(t, testConfig("10.244.0.0/16"), kubetest.Namespace("ns1", nil), kubetest.Node("node1", nil), web, other, pol)
	pgName := netpol.PortGroupName("ns1/web")
	members := func() []string {
		var names []string
		byUUID := map[string]string{}
		for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
			byUUID[p.UUID] = p.Name
		}
		for _, pg := range unitRows[*nbdb.PortGroup](e) {
			if pg.Name == pgName {
				for _, u := range pg.Ports {
					names = append(names, byUUID[u])
				}
			}
		}
		slices.Sort(names)
		return names
	}
	waitMembers := func(want ...string) {
		t.Helper()
		kubetest.Eventually(t, fmt.Sprintf("port group %s = %v", pgName, want), func() (bool, string) {
			got := members()
			return slices.Equal(got, want), fmt.Sprint(got)
		})
	}
	waitMembers(contract.PodPort("ns1", "web"))
	pg := waitRow(e, "port group", func(r *nbdb.PortGroup) bool { return r.Name == pgName })
	if len(pg.ACLs) == 0 {
		t.Fatal("the policy's port group has no ACLs")
	}
	acls := unitRows[*nbdb.ACL](e)
	var drop bool
	for _, a := range acls {
		if slices.Contains(pg.ACLs, a.UUID) && a.Action == nbdb.ACLActionDrop && strings.Contains(a.Match, "@"+pgName) {
			drop = true
		}
	}
	if !drop {
		t.Errorf("no drop ACL on the policy's port group among %d ACLs", len(acls))
	}

	t.Run("a pod labelled into the selector joins the port group", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"app":"web"}}}`)
		if _, err := e.kube.CoreV1().Pods("ns1").Patch(e.ctx, "other", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitMembers(contract.PodPort("ns1", "other"), contract.PodPort("ns1", "web"))
	})
	t.Run("a pod labelled as a client enters the peer's address set", func(t *testing.T) {
		client := kubetest.Pod("ns1", "client", "node1", map[string]string{"role": "client"})
		e.create(client)
		ip := waitRow(e, "client port", lspNamed(contract.PodPort("ns1", "client")))
		addr := strings.Fields(ip.Addresses[0])[1]
		waitRow(e, "address set with the client", func(r *nbdb.AddressSet) bool { return slices.Contains(r.Addresses, addr) })
	})
	t.Run("a deleted policy leaves nothing", func(t *testing.T) {
		if err := e.kube.NetworkingV1().NetworkPolicies("ns1").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNoRow(e, "port group deleted", func(r *nbdb.PortGroup) bool { return r.Name == pgName })
		waitNoRow(e, "peer address sets deleted", func(*nbdb.AddressSet) bool { return true })
	})
}

// A row the master owns that someone else deletes (an operator with ovn-nbctl) comes back:
// the NB cache event enqueues its owner.
func TestUnitPutsBackDeletedRows(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"), kubetest.Node("node1", nil))
	mgmt := waitRow(e, "management port", lspNamed(contract.ManagementPort("node1")))
	ls := waitRow(e, "switch node1", lsNamed("node1"))
	ops, err := e.reader.Where(ls).Mutate(ls, model.Mutation{Field: &ls.Ports, Mutator: "delete", Value: []string{mgmt.UUID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(e.ctx, e.reader, ops...); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, "management port back", func() (bool, string) {
		for _, p := range unitRows[*nbdb.LogicalSwitchPort](e) {
			if p.Name == contract.ManagementPort("node1") && p.UUID != mgmt.UUID {
				return true, ""
			}
		}
		return false, "not yet"
	})
}
