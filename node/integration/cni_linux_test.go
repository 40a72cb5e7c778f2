package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// TestCNI runs the plugin through libcni as a container runtime does, against two nodes
// running ovnt-node and ovn-controller, for every CNI version the plugin speaks; then the
// failure cases and a restart of the agent under live pods.
func TestCNI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t0 := time.Now()
	e := newEnv(ctx, t, "node1", "node2")
	for _, n := range e.nodes {
		e.startAgent(ctx, n)
	}
	// Through the real plugin: until ovn-controller runs, the network is not available.
	early := e.runtime(t, e.nodes[0], "1.1.0", t.TempDir())
	if err := early.cni.GetStatusNetworkList(ctx, early.list); cniCode(err) != 50 {
		t.Errorf("STATUS before ovn-controller runs: %v, want code 50", err)
	}
	e.startControllers(ctx)
	e.waitReady(ctx)
	t.Logf("cluster of two nodes ready after %v", time.Since(t0).Round(time.Millisecond))

	for i, version := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		if !t.Run("cniVersion="+version, func(t *testing.T) { testLifecycle(ctx, t, e, version, i) }) {
			return
		}
	}
	t.Run("installed list", func(t *testing.T) { testRuntimes(ctx, t, e) })
	t.Run("leaked ports", func(t *testing.T) { testLeakCollector(ctx, t, e) })
	t.Run("failures", func(t *testing.T) { testFailures(ctx, t, e) })
	t.Run("agent restart", func(t *testing.T) { testAgentRestart(ctx, t, e) })
	// Last: node2 has no database afterwards.
	t.Run("database gone", func(t *testing.T) { testDatabaseGone(ctx, t, e) })
}

// testLifecycle: VERSION, STATUS, ADD of a pod on each node, CHECK, traffic between them and
// from the nodes, a repeated ADD, DEL, DEL again, GC.
func testLifecycle(ctx context.Context, t *testing.T, e *env, version string, i int) {
	n1, n2 := e.nodes[0], e.nodes[1]
	rt := e.runtime(t, n1, version, t.TempDir())
	rt2 := e.runtime(t, n2, version, t.TempDir())

	info, err := rt.cni.GetVersionInfo(ctx, "ovnt-cni")
	if err != nil || !slices.Contains(info.SupportedVersions(), version) {
		t.Fatalf("VERSION: %v %v", info, err)
	}
	if err := rt.cni.GetStatusNetworkList(ctx, rt.list); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	a := e.newPod(ctx, t, n1, fmt.Sprintf("a%d", i), 10+i, podOpts{})
	b := e.newPod(ctx, t, n2, fmt.Sprintf("b%d", i), 10+i, podOpts{})
	resA := add(ctx, t, rt, a, version)
	add(ctx, t, rt2, b, version)
	checkAttachment(ctx, t, a)
	checkAttachment(ctx, t, b)
	for _, x := range []struct {
		rt *runtime
		p  *pod
	}{{rt, a}, {rt2, b}} {
		if err := x.rt.cni.CheckNetworkList(ctx, x.rt.list, x.p.rt()); err != nil {
			t.Errorf("CHECK %s: %v", x.p.name, err)
		}
	}

	ping(ctx, t, "pod a -> pod b across nodes", a.netns, b.ip.Addr().String())
	ping(ctx, t, "pod b -> pod a across nodes", b.netns, a.ip.Addr().String())
	serve(t, b.netns, &probe.Server{Name: "default/b", Echo: []uint16{8080}})
	tcpEcho(ctx, t, "pod a -> pod b", a.netns, b.ip.Addr().String()+":8080", 256<<10)
	ping(ctx, t, "node1 -> its own pod through the management port", n1.Netns, a.ip.Addr().String())
	ping(ctx, t, "node1 -> node2's pod through the management port", n1.Netns, b.ip.Addr().String())
	tcpEcho(ctx, t, "node1 -> pod b", n1.Netns, b.ip.Addr().String()+":8080", 64<<10)

	again := add(ctx, t, rt, a, version)
	if ja, jb := asJSON(t, resA), asJSON(t, again); ja != jb {
		t.Errorf("a repeated ADD returned\n%s\nthe first returned\n%s", jb, ja)
	}
	if c := portCount(ctx, t, a); c != 1 {
		t.Errorf("after a repeated ADD pod a has %d ports, want 1", c)
	}

	for range 2 { // DEL is idempotent
		if err := rt.cni.DelNetworkList(ctx, rt.list, a.rt()); err != nil {
			t.Errorf("DEL a: %v", err)
		}
		if err := rt2.cni.DelNetworkList(ctx, rt2.list, b.rt()); err != nil {
			t.Errorf("DEL b: %v", err)
		}
	}
	assertGone(ctx, t, a)
	assertGone(ctx, t, b)
	testGC(ctx, t, e, version, i)
}

// testGC leaves pods behind as a runtime that lost its state would, and checks GC removes
// the ones not listed as valid (GC reaches the plugin from cniVersion 1.1.0 on).
func testGC(ctx context.Context, t *testing.T, e *env, version string, i int) {
	n1 := e.nodes[0]
	stale := e.newPod(ctx, t, n1, fmt.Sprintf("s%d", i), 20+i, podOpts{})
	kept := e.newPod(ctx, t, n1, fmt.Sprintf("k%d", i), 30+i, podOpts{})
	rt := e.runtime(t, n1, version, t.TempDir())
	add(ctx, t, rt, stale, version)
	add(ctx, t, rt, kept, version)
	// A runtime with an empty cache: libcni itself DELs nothing, the plugin's GC must.
	fresh := e.runtime(t, n1, version, t.TempDir())
	err := fresh.cni.GCNetworkList(ctx, fresh.list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{
		{ContainerID: kept.containerID, IfName: "eth0"},
	}})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if version == "1.1.0" {
		assertGone(ctx, t, stale)
	} else if portCount(ctx, t, stale) != 1 {
		t.Errorf("GC at cniVersion %s reached the plugin", version)
	}
	if c := portCount(ctx, t, kept); c != 1 {
		t.Errorf("GC removed a valid attachment (%d ports left)", c)
	}
	for _, p := range []*pod{stale, kept} {
		if err := rt.cni.DelNetworkList(ctx, rt.list, p.rt()); err != nil {
			t.Errorf("DEL %s: %v", p.name, err)
		}
		assertGone(ctx, t, p)
	}
}

// add runs ADD for p and checks the result against what the master allocated.
func add(ctx context.Context, t *testing.T, rt *runtime, p *pod, version string) types.Result {
	t.Helper()
	t0 := time.Now()
	res, err := rt.cni.AddNetworkList(ctx, rt.list, p.rt())
	if err != nil {
		t.Fatalf("ADD %s: %v", p.name, err)
	}
	t.Logf("ADD %s on %s (cniVersion %s) took %v", p.name, p.node.Name, version, time.Since(t0).Round(time.Millisecond))
	if res.Version() != version {
		t.Errorf("ADD %s: result version %s, want %s", p.name, res.Version(), version)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	gw := p.node.gateway().String()
	switch {
	case len(r.Interfaces) != 2 || r.Interfaces[0].Name != p.hostIf() || r.Interfaces[1].Name != "eth0":
		t.Errorf("ADD %s: interfaces %v", p.name, r.Interfaces)
	case r.Interfaces[1].Sandbox != p.netnsPath() || r.Interfaces[1].Mac != p.mac.String():
		t.Errorf("ADD %s: pod interface %+v", p.name, *r.Interfaces[1])
	case len(r.IPs) != 1 || r.IPs[0].Address.String() != p.ip.String() || r.IPs[0].Gateway.String() != gw ||
		r.IPs[0].Interface == nil || *r.IPs[0].Interface != 1:
		t.Errorf("ADD %s: IPs %v", p.name, r.IPs)
	case len(r.Routes) != 2 || r.Routes[0].Dst.String() != "0.0.0.0/0" || r.Routes[0].GW.String() != gw ||
		r.Routes[1].Dst.String() != serviceCIDR:
		t.Errorf("ADD %s: routes %v", p.name, r.Routes)
	case len(r.DNS.Nameservers) != 0:
		t.Errorf("ADD %s: DNS %v", p.name, r.DNS)
	}
	return res
}

func asJSON(t *testing.T, r types.Result) string {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errNames fails unless err is a CNI error naming the pod.
func errNames(t *testing.T, what string, err error, pod string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: ADD succeeded", what)
		return
	}
	if cniCode(err) == 0 || !strings.Contains(err.Error(), "default/"+pod) {
		t.Errorf("%s: error %q (code %d) does not name default/%s", what, err, cniCode(err), pod)
	}
}
