package cniserver

// Pods on a Windows node, run on Linux: the server's ADD, DEL, CHECK and GC over
// hostnet.Transparent with HNS from hnstest.Model and a real ovsdb-server; the tests check the
// HNS endpoints and the OVS rows each call leaves.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/hns/hnstest"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/ovstest"
)

// fakePods gives every pod 10.244.1.<n>/24, n from the pod's name ("web-<n>").
type fakePods struct{}

func (fakePods) Network(_ context.Context, p cni.PodArgs) (contract.PodNetwork, string, error) {
	var n int
	if _, err := fmt.Sscanf(p.Name, "web-%d", &n); err != nil {
		return contract.PodNetwork{}, "", err
	}
	ip := netip.AddrFrom4([4]byte{10, 244, 1, byte(n)})
	return contract.PodNetwork{IPs: []netip.Prefix{netip.PrefixFrom(ip, 24)}, MAC: contract.MACFromIP(ip),
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")}, Routes: podRoutes}, "uid-" + p.Name, nil
}

// podRoutes are every pod's routes besides the default one, as a master may annotate them.
var podRoutes = []contract.ParsedRoute{{Dest: netip.MustParsePrefix("100.64.0.0/16"), NextHop: netip.MustParseAddr("10.244.1.1")}}

type winEnv struct {
	t     *testing.T
	db    *ovstest.DB
	m     *hnstest.Model
	vs    *ovstest.VSwitchd // ovs-vswitchd binding OVS interfaces to m's Hyper-V ports
	host  *hostnet.Transparent
	srv   *Server
	block sync.Map // iface-ids the fake ovn-controller does not install
}

func newWinEnv(t *testing.T) *winEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := &winEnv{t: t, db: ovstest.Start(t), m: hnstest.NewModel()}
	mac, _ := net.ParseMAC("00:15:5d:01:02:03")
	e.m.AddAdapter("Ethernet0", mac, true, hns.IPConfig{Addrs: []netip.Prefix{netip.MustParsePrefix("172.18.0.5/24")}})
	host := hostnet.NewTransparent(e.m, e.m, e.m, hostnet.TransparentConfig{IPMoveTimeout: 3 * time.Second,
		Poll: 20 * time.Millisecond, DeleteTimeout: 300 * time.Millisecond, Log: logr.Discard()})
	sw := e.db.Connect()
	if err := sw.EnsureBridge(ctx, ovs.Bridge{Name: "br-int", FailMode: "secure"}); err != nil {
		t.Fatal(err)
	}
	_, err := host.SetupUplink(ctx, hostnet.Uplink{Iface: "Ethernet0", Bridge: "br-phy",
		PodSubnet: netip.MustParsePrefix("10.244.1.0/24"), PodSubnetRouter: netip.MustParseAddr("10.244.1.1"),
		Attach: func(context.Context, net.HardwareAddr) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	e.m.Calls()
	e.vs = e.db.FakeVSwitchd(e.m)
	// ovn-controller binds a port only once OVS has a datapath port for it.
	e.db.FakeOVNController(func(name, id string) bool {
		_, blocked := e.block.Load(id)
		_, bound := e.m.OVSBinding(name)
		return blocked || !bound
	})
	e.host = host
	e.srv = e.newServer()
	return e
}

// newServer is the agent's CNI server over e's host and switch (again after a restart).
func (e *winEnv) newServer() *Server {
	s := New(Config{Bridge: "br-int", MTU: 1400, AnnotationTimeout: time.Second, InstallTimeout: 2 * time.Second, BindTimeout: 15 * time.Second},
		e.host, e.db.Connect(), fakePods{}, func(context.Context) error { return nil }, logr.Discard())
	e.t.Cleanup(s.Close)
	return s
}

// started starts pod n's sandbox (containerd does after ADD) and waits, within bounds,
// until the pod's port is bound to the endpoint's vNIC and installed, or the test fails.
func (e *winEnv) started(n int, netns string) {
	e.t.Helper()
	if err := e.m.StartSandbox(netns); err != nil {
		e.t.Fatal(err)
	}
	name := podIfName(n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, bound := e.m.OVSBinding(name)
		inst, _ := e.db.TryVsctl("--if-exists", "get", "Interface", name, "external_ids:ovn-installed")
		if bound && !b.ByOVS && strings.Trim(inst, `"`) == "true" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pod %d: its port %s is not bound to the pod's vNIC and installed (binding %+v, %v; ovn-installed %s; Hyper-V ports %v)",
				n, name, b, bound, inst, e.m.HyperVPorts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// winConf is what containerd 1.7 sends: the installed list's cniVersion, 1.0.0.
const winConf = `{"cniVersion":"1.0.0","name":"ovn-transparent","type":"ovnt-cni",
 "runtimeConfig":{"dns":{"servers":["10.96.0.10"],"searches":["ns1.svc.cluster.local","svc.cluster.local","cluster.local"]}}}`

// call makes a CNI call for pod web-<n> in namespace ns1, sandbox netns (an HCN namespace).
func (e *winEnv) call(cmd string, n int, netns string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return e.srv.Handle(ctx, cni.Request{Command: cmd, ContainerID: fmt.Sprintf("sandbox-%d", n), Netns: netns, IfName: "eth0",
		Args: fmt.Sprintf("K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-%d", n), StdinData: json.RawMessage(winConf)})
}

func podIfName(n int) string { return hostnet.HostIfName(fmt.Sprintf("sandbox-%d", n), "eth0") }

// endpoints returns the pod endpoints in HNS by name.
func (e *winEnv) endpoints() map[string]hns.Endpoint {
	out := map[string]hns.Endpoint{}
	for _, ep := range e.m.AllEndpoints() {
		out[ep.Name] = ep
	}
	return out
}

// brIntPorts returns the pod ports on br-int.
func (e *winEnv) brIntPorts() []string {
	out := e.db.Vsctl("list-ports", "br-int")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// checkPod starts pod n's sandbox and checks its endpoint, vNIC and port as an ADD and the
// agent's worker after it leave them.
func (e *winEnv) checkPod(n int, netns string) {
	e.t.Helper()
	e.started(n, netns)
	name := podIfName(n)
	ip := netip.AddrFrom4([4]byte{10, 244, 1, byte(n)})
	ep, ok := e.endpoints()[name]
	if !ok {
		e.e("pod %d: no endpoint %s in HNS", n, name)
		return
	}
	if ep.MAC.String() != contract.MACFromIP(ip).String() || !slices.Equal(ep.IPs, []netip.Prefix{netip.PrefixFrom(ip, 24)}) ||
		ep.Gateway != netip.MustParseAddr("10.244.1.1") || ep.Namespace != netns ||
		!slices.Equal(ep.Routes, []hns.Route{{Dst: podRoutes[0].Dest, NextHop: podRoutes[0].NextHop}}) ||
		!slices.Equal(ep.DNS.Servers, []netip.Addr{netip.MustParseAddr("10.96.0.10")}) ||
		!slices.Equal(ep.DNS.Search, []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}) {
		e.e("pod %d: endpoint %+v", n, ep)
	}
	if v, ok := e.m.InterfaceNow(hns.HostVNIC(name)); !ok || v.MTU != 1400 {
		e.e("pod %d: vNIC %+v (%v), want MTU 1400", n, v, ok)
	}
	if !e.m.Forwards(name) {
		e.e("pod %d: the vSwitch drops the frames of the pod's vNIC", n)
	}
	for col, want := range map[string]string{
		"type": "internal", "external_ids:iface-id": "ns1_web-" + fmt.Sprint(n),
		"external_ids:attached-mac": contract.MACFromIP(ip).String(), "external_ids:ovnt-sandbox": netns,
	} {
		if got, err := e.db.TryVsctl("get", "Interface", name, col); err != nil || strings.Trim(got, `"`) != want {
			e.e("pod %d: interface %s %s = %s (%v), want %s", n, name, col, got, err, want)
		}
	}
}

func (e *winEnv) e(format string, args ...any) { e.t.Helper(); e.t.Errorf(format, args...) }

// checkGone checks pod n left no endpoint and no port.
func (e *winEnv) checkGone(what string, n int) {
	e.t.Helper()
	name := podIfName(n)
	if _, ok := e.endpoints()[name]; ok {
		e.e("%s: endpoint %s left in HNS", what, name)
	}
	if slices.Contains(e.brIntPorts(), name) {
		e.e("%s: port %s left on br-int", what, name)
	}
}

func TestWindowsPodAddDel(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	first, err := e.call("ADD", 7, ns)
	if err != nil {
		t.Fatal(err)
	}
	e.checkPod(7, ns)
	if calls := e.m.Calls(); !slices.Contains(calls, "CreateEndpoint") {
		t.Errorf("first ADD did not create an endpoint: %v", calls)
	}
	var res current.Result
	// containerd 1.7 calls at the list's cniVersion, 1.0.0, and parses only results of
	// that version (review C2).
	if err := json.Unmarshal(first, &res); err != nil || res.CNIVersion != "1.0.0" || len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.244.1.7/24" ||
		len(res.Interfaces) != 2 || res.Interfaces[0].Name != podIfName(7) || res.Interfaces[1].Sandbox != ns {
		t.Errorf("ADD result %s (%v)", first, err)
	}

	again, err := e.call("ADD", 7, ns)
	if err != nil {
		t.Fatalf("repeated ADD: %v", err)
	}
	if string(again) != string(first) {
		t.Errorf("repeated ADD result %s, want %s", again, first)
	}
	if calls := e.m.Calls(); slices.Contains(calls, "CreateEndpoint") {
		t.Errorf("repeated ADD created an endpoint: %v", calls)
	}
	if n := len(e.endpoints()); n != 1 {
		t.Errorf("%d endpoints after a repeated ADD, want 1", n)
	}
	e.checkPod(7, ns)
	if _, err := e.call("CHECK", 7, ns); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	// The endpoint falls out of the namespace: CHECK says so, and ADD puts it back.
	ep := e.endpoints()[podIfName(7)]
	if err := e.m.Detach(context.Background(), ns, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("CHECK", 7, ns); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("CHECK of a detached endpoint: %v, want an error naming the namespace", err)
	}
	if _, err := e.call("ADD", 7, ns); err != nil {
		t.Fatalf("ADD re-attaching: %v", err)
	}
	e.checkPod(7, ns)
	if _, err := e.call("CHECK", 7, ns); err != nil {
		t.Errorf("CHECK after the re-attaching ADD: %v", err)
	}

	for i := range 2 {
		if _, err := e.call("DEL", 7, ns); err != nil {
			t.Fatalf("DEL %d: %v", i+1, err)
		}
		e.checkGone(fmt.Sprintf("DEL %d", i+1), 7)
	}
	if _, err := e.call("CHECK", 7, ns); err == nil {
		t.Error("CHECK passed after DEL")
	}
}

// A failure at any step of ADD leaves no endpoint and no port, and the next ADD works.
func TestWindowsFailedAddLeavesNothing(t *testing.T) {
	e := newWinEnv(t)
	// The HNS calls a successful ADD makes are the steps to break.
	ns := e.m.AddNamespace()
	if _, err := e.call("ADD", 1, ns); err != nil {
		t.Fatal(err)
	}
	// The worker's calls after ADD (waiting for the vNIC, its MTU) are not ADD's steps.
	steps := slices.Compact(slices.DeleteFunc(e.m.Calls(), func(op string) bool { return op == "PodVNIC" || op == "SetMTU" }))
	if _, err := e.call("DEL", 1, ns); err != nil {
		t.Fatal(err)
	}
	if len(steps) < 3 {
		t.Fatalf("ADD made HNS calls %v, want at least lookup, create, attach", steps)
	}
	t.Logf("HNS steps of ADD: %v", steps)
	boom := errors.New("injected HNS failure")
	for i, op := range steps {
		n := 10 + i
		ns := e.m.AddNamespace()
		e.m.Fail(op, boom)
		_, err := e.call("ADD", n, ns)
		e.m.Heal(op)
		if err == nil || !strings.Contains(err.Error(), boom.Error()) {
			t.Errorf("ADD with %s failing: %v, want the injected failure", op, err)
		}
		e.checkGone("ADD with "+op+" failing", n)
		if _, err := e.call("ADD", n, ns); err != nil {
			t.Errorf("ADD after %s healed: %v", op, err)
		}
		e.checkPod(n, ns)
	}

	// The OVS steps: the port's name is taken on another bridge...
	e.db.Vsctl("add-br", "br-other", "--", "add-port", "br-other", podIfName(31))
	if _, err := e.call("ADD", 31, ns); err == nil {
		t.Error("ADD succeeded with its port name taken")
	}
	if _, ok := e.endpoints()[podIfName(31)]; ok {
		t.Error("ADD with its port name taken left its endpoint")
	}
	// ...or the sandbox's namespace is gone.
	if _, err := e.call("ADD", 32, "00000000-dead-0000-0000-000000000000"); err == nil {
		t.Error("ADD into a missing HCN namespace succeeded")
	}
	e.checkGone("ADD into a missing namespace", 32)
}

// GC removes the endpoints and ports of attachments the runtime no longer has, among them
// an endpoint whose deletion hung during DEL and was left to GC.
func TestWindowsGC(t *testing.T) {
	e := newWinEnv(t)
	ns := map[int]string{}
	for _, n := range []int{1, 2, 3} {
		ns[n] = e.m.AddNamespace()
		if _, err := e.call("ADD", n, ns[n]); err != nil {
			t.Fatal(err)
		}
	}
	// HNS hangs deleting pod 3's endpoint: DEL gives up on it after DeleteTimeout, keeps
	// the port (M9: OVS would delete the endpoint's Hyper-V port with it) and succeeds, so
	// the runtime can go on.
	e.m.Hang("DeleteEndpoint")
	if _, err := e.call("DEL", 3, ns[3]); err != nil {
		t.Fatalf("DEL with a hung HNS delete: %v", err)
	}
	e.m.Heal("DeleteEndpoint")
	if _, ok := e.endpoints()[podIfName(3)]; !ok {
		t.Fatal("the hung delete removed the endpoint anyway; the test proves nothing")
	}
	if !slices.Contains(e.brIntPorts(), podIfName(3)) {
		t.Error("DEL removed pod 3's port while HNS still had its endpoint")
	}

	gc := `{"cniVersion":"1.1.0","name":"ovn-transparent","type":"ovnt-cni","cni.dev/valid-attachments":[{"containerID":"sandbox-1","ifname":"eth0"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.srv.Handle(ctx, cni.Request{Command: "GC", StdinData: json.RawMessage(gc)}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	e.checkPod(1, ns[1])
	e.checkGone("GC", 2)
	e.checkGone("GC", 3)
	if got := e.brIntPorts(); !slices.Equal(got, []string{podIfName(1)}) {
		t.Errorf("br-int ports after GC %v", got)
	}
}

// TestWindowsLeakCollector: the agent's own collector (containerd never calls GC) removes
// the port and endpoint of a pod that is gone and an endpoint whose port a hung DEL left,
// each only on the second pass that finds it, and never those of a pod that exists or whose
// existence it cannot tell.
func TestWindowsLeakCollector(t *testing.T) {
	e := newWinEnv(t)
	ns := map[int]string{}
	for _, n := range []int{1, 2, 3, 4} {
		ns[n] = e.m.AddNamespace()
		if _, err := e.call("ADD", n, ns[n]); err != nil {
			t.Fatal(err)
		}
	}
	e.m.Hang("DeleteEndpoint")
	if _, err := e.call("DEL", 3, ns[3]); err != nil {
		t.Fatalf("DEL with a hung HNS delete: %v", err)
	}
	e.m.Heal("DeleteEndpoint")
	exists := func(_ context.Context, namespace, name, uid string) (bool, error) {
		switch {
		case namespace != "ns1" || uid != "uid-"+name:
			return false, fmt.Errorf("the port names pod %s/%s uid %s, not what ADD attached", namespace, name, uid)
		case name == "web-4":
			return false, errors.New("the API server is away")
		}
		return name == "web-1", nil
	}
	c := e.srv.NewCollector(exists, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := c.Collect(ctx); n != 0 || err == nil {
		t.Errorf("first pass removed %d (%v), want 0 and the API error for web-4", n, err)
	}
	for _, n := range []int{1, 2, 4} {
		e.checkPod(n, ns[n])
	}
	if _, ok := e.endpoints()[podIfName(3)]; !ok {
		t.Error("the first pass removed the endpoint without a port")
	}
	if n, _ := c.Collect(ctx); n != 2 {
		t.Errorf("second pass removed %d, want 2 (pod 2's port and endpoint count once, pod 3's endpoint)", n)
	}
	e.checkPod(1, ns[1])
	e.checkPod(4, ns[4])
	e.checkGone("collector", 2)
	e.checkGone("collector", 3)
}

// TestWindowsPortBoundOnceTheSandboxRuns: containerd creates the pod's vNIC only when it
// starts the sandbox, after ADD. ADD returns without waiting for ovn-controller and leaves
// the port without a type (an "internal" one would make OVS bind a host vNIC of its own,
// and the pod's real vNIC would never forward); once the vNIC exists the agent sets its MTU
// (mtu_request does nothing on Windows) and makes the port internal, retrying failures.
func TestWindowsPortBoundOnceTheSandboxRuns(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	e.block.Store("ns1_web-5", true)
	if _, err := e.call("ADD", 5, ns); err != nil {
		t.Fatalf("ADD before ovn-controller installed the port: %v, want success (nothing can bind before the sandbox runs)", err)
	}
	name := podIfName(5)
	e.vs.Sync()
	if b, ok := e.m.OVSBinding(name); ok {
		t.Errorf("right after ADD the port is bound to %+v, before the pod's vNIC exists", b)
	}
	if got := e.db.Vsctl("get", "Interface", name, "type"); got != `""` {
		t.Errorf("right after ADD the port's type is %s, want empty", got)
	}
	boom := errors.New("injected SetMTU failure")
	e.m.Fail("SetMTU", boom)
	if err := e.m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(e.m.Calls(), "SetMTU"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never set the MTU of the pod's vNIC")
		}
	}
	if got := e.db.Vsctl("get", "Interface", name, "type"); got != `""` {
		t.Errorf("the port became %s though the vNIC's MTU could not be set", got)
	}
	e.m.Heal("SetMTU")
	e.block.Delete("ns1_web-5")
	e.checkPod(5, ns)
	if _, err := e.call("CHECK", 5, ns); err != nil {
		t.Errorf("CHECK: %v", err)
	}
}

// A DEL before the sandbox ran stops the worker: nothing is left, and the worker does not
// bring the port back.
func TestWindowsDelBeforeSandboxRuns(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	if _, err := e.call("ADD", 6, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("DEL", 6, ns); err != nil {
		t.Fatal(err)
	}
	e.srv.bmu.Lock()
	left := len(e.srv.binders)
	e.srv.bmu.Unlock()
	if left != 0 {
		t.Errorf("%d workers run after DEL", left)
	}
	if err := e.m.StartSandbox(ns); err != nil {
		t.Fatal(err)
	}
	e.checkGone("DEL before the sandbox ran", 6)
}

// An agent restarted between ADD and the sandbox's start finishes the port.
func TestWindowsRestartResumesBinding(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	if _, err := e.call("ADD", 8, ns); err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e.srv = e.newServer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.ResumeBinders(ctx); err != nil {
		t.Fatal(err)
	}
	e.checkPod(8, ns)
}

// TestWindowsDelRemovesEndpointFirst (review M9): OVS deletes the Hyper-V port of an
// internal interface it removes, the HNS endpoint's included. DEL removes the endpoint
// first, and while HNS has not finished (its deletion hung) it keeps the port, so OVS never
// takes a port from under an endpoint that still exists; the collector finishes both.
func TestWindowsDelRemovesEndpointFirst(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	if _, err := e.call("ADD", 5, ns); err != nil {
		t.Fatal(err)
	}
	e.checkPod(5, ns)
	name := podIfName(5)
	e.m.Hang("DeleteEndpoint")
	if _, err := e.call("DEL", 5, ns); err != nil {
		t.Fatalf("DEL with a hung HNS delete: %v", err)
	}
	e.vs.Sync() // ovs-vswitchd acts on what DEL left in its database
	if _, ok := e.endpoints()[name]; !ok {
		t.Fatal("the endpoint is gone although HNS hung")
	}
	// The detach took the endpoint's vNIC; the port, still in br-int, must not get a
	// stray host vNIC of OVS's own (nothing in the database changed, so ovs-vswitchd does
	// not even try).
	if b, ok := e.m.OVSBinding(name); ok {
		t.Errorf("the port of endpoint %s is bound to %+v after its vNIC went (Hyper-V ports %v)", name, b, e.m.HyperVPorts())
	}
	if !slices.Contains(e.brIntPorts(), name) {
		t.Errorf("DEL removed the port while its endpoint's deletion had not finished")
	}
	e.m.Heal("DeleteEndpoint")
	c := e.srv.NewCollector(func(context.Context, string, string, string) (bool, error) { return false, nil }, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 2 {
		if _, err := c.Collect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.checkGone("collector after a hung DEL", 5)
	// A DEL that HNS answers removes both at once.
	ns = e.m.AddNamespace()
	if _, err := e.call("ADD", 6, ns); err != nil {
		t.Fatal(err)
	}
	e.checkPod(6, ns)
	if _, err := e.call("DEL", 6, ns); err != nil {
		t.Fatal(err)
	}
	e.checkGone("DEL", 6)
}

// Review L2: the configuration list declares portMappings, and a Windows node has no host
// port NAT yet, so a pod with a hostPort fails its ADD with an error saying so (not a pod
// whose hostPort silently does nothing), and leaves nothing behind.
func TestWindowsHostPortRefused(t *testing.T) {
	e := newWinEnv(t)
	ns := e.m.AddNamespace()
	conf := `{"cniVersion":"1.0.0","name":"ovn-transparent","type":"ovnt-cni",
 "runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}}`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := e.srv.Handle(ctx, cni.Request{Command: "ADD", ContainerID: "sandbox-8", Netns: ns, IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-8", StdinData: json.RawMessage(conf)})
	if err == nil || !strings.Contains(err.Error(), "hostPort is not supported") {
		t.Fatalf("ADD of a pod with a hostPort: %v, want a refusal naming hostPort", err)
	}
	e.checkGone("refused hostPort", 8)
}
