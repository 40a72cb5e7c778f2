package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// testAgentRestart: pods connected before the agent dies keep their traffic, an established
// TCP connection included, while it is dead and after it restarts (over the socket file the
// killed agent left); the restarted agent knows the pods (CHECK, a repeated ADD, DEL).
func testAgentRestart(ctx context.Context, t *testing.T, e *env) {
	n1, n2 := e.nodes[0], e.nodes[1]
	rt1 := e.runtime(t, n1, "1.1.0", t.TempDir())
	rt2 := e.runtime(t, n2, "1.1.0", t.TempDir())
	x := e.newPod(ctx, t, n1, "x", 50, podOpts{})
	y := e.newPod(ctx, t, n2, "y", 50, podOpts{})
	first := add(ctx, t, rt1, x, "1.1.0")
	add(ctx, t, rt2, y, "1.1.0")
	serve(t, y.netns, &probe.Server{Name: "default/y", Echo: []uint16{9090}})
	conn, err := dial(ctx, x.netns, y.ip.Addr().String()+":9090")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := probe.Exchange(conn, 32<<10); err != nil {
		t.Fatal(err)
	}

	n1.agent.Kill()
	// The killed agent left its socket file; nobody answers on it.
	if err := rt1.cni.GetStatusNetworkList(ctx, rt1.list); cniCode(err) != 50 {
		t.Errorf("STATUS with the agent dead: %v, want code 50", err)
	}
	ping(ctx, t, "x -> y with node1's agent dead", x.netns, y.ip.Addr().String())
	if err := probe.Exchange(conn, 32<<10); err != nil {
		t.Errorf("established TCP with node1's agent dead: %v", err)
	}
	tr := time.Now()
	e.startAgent(ctx, n1)
	e.waitReady(ctx)
	t.Logf("killed agent restarted and ready in %v", time.Since(tr).Round(time.Millisecond))
	if err := probe.Exchange(conn, 32<<10); err != nil {
		t.Errorf("established TCP after node1's agent restarted: %v", err)
	}
	ping(ctx, t, "x -> y after the restart", x.netns, y.ip.Addr().String())
	if err := rt1.cni.CheckNetworkList(ctx, rt1.list, x.rt()); err != nil {
		t.Errorf("CHECK x after the restart: %v", err)
	}
	if again := add(ctx, t, rt1, x, "1.1.0"); asJSON(t, again) != asJSON(t, first) {
		t.Errorf("ADD after the restart returned %s, before %s", asJSON(t, again), asJSON(t, first))
	}
	if c := portCount(ctx, t, x); c != 1 {
		t.Errorf("x has %d ports after the restart, want 1", c)
	}
	for _, p := range []struct {
		rt *runtime
		p  *pod
	}{{rt1, x}, {rt2, y}} {
		if err := p.rt.cni.DelNetworkList(ctx, p.rt.list, p.p.rt()); err != nil {
			t.Errorf("DEL %s: %v", p.p.name, err)
		}
		assertGone(ctx, t, p.p)
	}
}
