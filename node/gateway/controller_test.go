package gateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// fakeSwitch is the database cache: the gateway bridge's ports, and the handlers a change
// calls.
type fakeSwitch struct {
	mu       sync.Mutex
	ports    []ovs.BridgePort
	handlers []func()
}

func (s *fakeSwitch) BridgePorts(_ context.Context, bridge string) ([]ovs.BridgePort, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bridge != "br-phy" {
		return nil, errors.New("no bridge " + bridge)
	}
	return slices.Clone(s.ports), nil
}

func (s *fakeSwitch) OnPortChange(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, fn)
}

// set replaces the ports and fires the change handlers, as a cache update does.
func (s *fakeSwitch) set(ports ...ovs.BridgePort) {
	s.mu.Lock()
	s.ports = ports
	hs := slices.Clone(s.handlers)
	s.mu.Unlock()
	for _, h := range hs {
		h()
	}
}

// fakeBridge is a switch's flow table as Sync leaves it; fail makes the next Syncs fail.
type fakeBridge struct {
	mu    sync.Mutex
	flows map[uint64][]openflow.Flow
	syncs int
	fail  int
}

func (b *fakeBridge) Sync(_ context.Context, cookie uint64, flows []openflow.Flow) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.syncs++
	if b.fail > 0 {
		b.fail--
		return errors.New("switch unreachable")
	}
	if b.flows == nil {
		b.flows = map[uint64][]openflow.Flow{}
	}
	b.flows[cookie] = slices.Clone(flows)
	return nil
}

func (b *fakeBridge) Dump(_ context.Context, cookie uint64) ([]openflow.Flow, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.flows[cookie]), nil
}

func (b *fakeBridge) state() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return flowsText(b.flows[Cookie]), b.syncs
}

type fixture struct {
	t  *testing.T
	sw *fakeSwitch
	br *fakeBridge
	c  *Controller
}

func start(t *testing.T, resync time.Duration, ports ...ovs.BridgePort) *fixture {
	return startConfig(t, Config{Bridge: "br-phy", Uplink: "eth0", LocalnetPort: "breth0_node1", MAC: nodeMAC, IP: nodeIP,
		Tunnel: TunnelFor("geneve"), Resync: resync}, ports...)
}

func startConfig(t *testing.T, cfg Config, ports ...ovs.BridgePort) *fixture {
	f := &fixture{t: t, sw: &fakeSwitch{ports: ports}, br: &fakeBridge{}}
	f.c = New(cfg, f.sw, f.br, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

// eventually waits until the bridge holds want (by Flows) or fails.
func (f *fixture) eventually(what string, want []openflow.Flow) int {
	f.t.Helper()
	wantText := flowsText(want)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, syncs := f.br.state()
		if got == wantText {
			return syncs
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: bridge has\n  %s\nwant\n  %s", what, strings.ReplaceAll(got, "\n", "\n  "), strings.ReplaceAll(wantText, "\n", "\n  "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quiet checks that no Sync happens for a while.
func (f *fixture) quiet(what string, syncs int) {
	f.t.Helper()
	time.Sleep(100 * time.Millisecond)
	if _, now := f.br.state(); now != syncs {
		f.t.Errorf("%s: %d more Syncs, want none", what, now-syncs)
	}
}

var uplink = uplinkPort(upPort, "")

func patchIface(ofport int) ovs.BridgePort { return patchPortOf("breth0_node1", ofport) }

func TestControllerFollowsThePorts(t *testing.T) {
	// The uplink is not numbered yet: nothing is written.
	f := start(t, time.Hour, brLocal, uplinkPort(0, ""))
	f.quiet("uplink without ofport", 0)

	f.sw.set(brLocal, uplink)
	syncs := f.eventually("uplink numbered: the host's rules", Flows(params(0)))
	// Changes elsewhere in the database (a pod's port) change no flow: no Sync.
	f.sw.set(brLocal, uplink)
	f.quiet("unrelated change", syncs)

	f.sw.set(brLocal, uplink, patchIface(0))
	f.quiet("patch port not numbered yet", syncs)
	f.sw.set(brLocal, uplink, patchIface(patchPort))
	f.eventually("patch port appeared", Flows(params(patchPort)))
	// ovs-vswitchd restarted and numbered the patch port differently.
	f.sw.set(brLocal, uplink, patchIface(7))
	f.eventually("patch port renumbered", Flows(params(7)))
	f.sw.set(brLocal, uplink)
	f.eventually("patch port gone", Flows(params(0)))

	f.sw.set(brLocal, uplink, patchIface(patchPort))
	f.c.SetNodePorts([]NodePort{{Protocol: openflow.IPProtoTCP, Port: 30080}, {Protocol: openflow.IPProtoUDP, Port: 30090}, {Protocol: openflow.IPProtoTCP, Port: 30080}})
	f.eventually("node ports (the duplicate dropped)", Flows(params(patchPort, NodePort{Protocol: openflow.IPProtoTCP, Port: 30080}, NodePort{Protocol: openflow.IPProtoUDP, Port: 30090})))
	f.c.SetNodePorts(nil)
	f.eventually("no node ports", Flows(params(patchPort)))
}

func TestControllerResyncsAndRetries(t *testing.T) {
	f := start(t, 50*time.Millisecond, brLocal, uplink, patchIface(patchPort))
	want := Flows(params(patchPort))
	syncs := f.eventually("first sync", want)
	// Every 50 ms a Sync reads the switch back (a flow deleted by hand comes back), even
	// though nothing changed in the database. Three more come (a loaded machine may take
	// longer than 150 ms; the bound only stops a controller that never resyncs).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, now := f.br.state()
		if now-syncs >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Syncs in 10 s with a 50 ms resync", now-syncs)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The switch is unreachable for three attempts; the controller keeps trying.
	f.br.mu.Lock()
	f.br.fail = 3
	f.br.flows = nil
	f.br.mu.Unlock()
	f.sw.set(brLocal, uplink, patchIface(9))
	f.eventually("after three failures", Flows(params(9)))
}

// TestControllerHostPort: with Config.HostPort (the Windows agent's host vNIC) the
// controller waits for that port's number, then installs the rules with it in LOCAL's
// place, and follows it when ovs-vswitchd renumbers it.
func TestControllerHostPort(t *testing.T) {
	withHost := func(patch, host uint32) []openflow.Flow {
		p := params(patch)
		p.Host = host
		return Flows(p)
	}
	f := startConfig(t, Config{Bridge: "br-phy", Uplink: "eth0", LocalnetPort: "breth0_node1", HostPort: "vEthernet (Ethernet0)",
		MAC: nodeMAC, IP: nodeIP, Tunnel: TunnelFor("geneve"), Resync: time.Hour}, brLocal, uplink)
	f.quiet("host port not added yet", 0)
	f.sw.set(brLocal, uplink, vnicPort(0))
	f.quiet("host port not numbered yet", 0)
	f.sw.set(brLocal, uplink, vnicPort(hostPort))
	f.eventually("host port numbered", withHost(0, hostPort))
	f.sw.set(brLocal, uplink, vnicPort(hostPort), patchIface(patchPort))
	f.eventually("patch port appeared", withHost(patchPort, hostPort))
	f.sw.set(brLocal, uplink, vnicPort(8), patchIface(patchPort))
	f.eventually("host port renumbered", withHost(patchPort, 8))
}
