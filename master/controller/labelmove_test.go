package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// pgMonitor records every committed state of the NB's port groups, as ovsdb-server
// reports them to a monitor: one update per committed transaction (the server may merge
// updates it could not send yet, which can only hide a state, never invent one).
type pgMonitor struct {
	mu     sync.Mutex
	ports  map[string]map[string]bool // port group UUID -> port UUIDs
	names  map[string]string          // port group UUID -> name
	states []map[string]map[string]bool
	err    error
}

// startPGMonitor runs ovsdb-client monitor on the Port_Group table until the test ends.
func (e *unitEnv) startPGMonitor() *pgMonitor {
	e.t.Helper()
	testenv.Require(e.t, "ovsdb-client")
	ctx, cancel := context.WithCancel(e.ctx)
	cmd := exec.CommandContext(ctx, "ovsdb-client", "--format=json", "monitor", e.nbSrv.Remote, "OVN_Northbound", "Port_Group", "name,ports")
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	m := &pgMonitor{ports: map[string]map[string]bool{}, names: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			m.apply(sc.Bytes())
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done; cmd.Wait() })
	return m
}

// apply records one monitor update: {"headings":["row","action","name","ports"],"data":[...]},
// a modified row as an "old" line with its UUID followed by a "new" line without.
func (m *pgMonitor) apply(line []byte) {
	var u struct {
		Data [][]json.RawMessage `json:"data"`
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := json.Unmarshal(line, &u); err != nil {
		m.err = fmt.Errorf("monitor line %q: %w", line, err)
		return
	}
	last := ""
	for _, row := range u.Data {
		if len(row) != 4 {
			m.err = fmt.Errorf("monitor row %s: want 4 columns", row)
			return
		}
		var uuid, action, name string
		json.Unmarshal(row[0], &uuid)
		json.Unmarshal(row[1], &action)
		json.Unmarshal(row[2], &name)
		switch action {
		case "old":
			last = uuid
			continue
		case "new":
			uuid = last
		case "delete":
			delete(m.ports, uuid)
			delete(m.names, uuid)
			continue
		}
		ports, err := uuidSet(row[3])
		if err != nil {
			m.err = err
			return
		}
		m.ports[uuid], m.names[uuid] = ports, name
	}
	state := map[string]map[string]bool{}
	for u, p := range m.ports {
		state[m.names[u]] = p
	}
	m.states = append(m.states, state)
}

// uuidSet parses an OVSDB set of UUIDs in JSON: ["uuid","x"] or ["set",[["uuid","x"],...]].
func uuidSet(raw json.RawMessage) (map[string]bool, error) {
	var v []json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 2 {
		return nil, fmt.Errorf("not an OVSDB set: %s", raw)
	}
	var tag string
	json.Unmarshal(v[0], &tag)
	out := map[string]bool{}
	switch tag {
	case "uuid":
		var u string
		json.Unmarshal(v[1], &u)
		out[u] = true
	case "set":
		var items [][2]string
		if err := json.Unmarshal(v[1], &items); err != nil {
			return nil, fmt.Errorf("set %s: %w", raw, err)
		}
		for _, it := range items {
			out[it[1]] = true
		}
	default:
		return nil, fmt.Errorf("not an OVSDB set: %s", raw)
	}
	return out, nil
}

// snapshot returns the states recorded so far.
func (m *pgMonitor) snapshot() ([]map[string]map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]map[string]bool(nil), m.states...), m.err
}

func denyIngress(ns, name, app string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

// M1: a pod whose labels move it from one policy's selector to another's is isolated by one
// of them in every state the NB commits: never in neither port group, even for a moment.
func TestUnitLabelMoveNeverUnisolates(t *testing.T) {
	e := startUnit(t, testConfig("10.244.0.0/16"), kubetest.Namespace("ns1", nil), subnetNode("node1", node1Subnet),
		kubetest.Pod("ns1", "mover", "node1", map[string]string{"app": "a"}),
		kubetest.Pod("ns1", "stay-a", "node1", map[string]string{"app": "a"}),
		kubetest.Pod("ns1", "stay-b", "node1", map[string]string{"app": "b"}),
		denyIngress("ns1", "deny-a", "a"), denyIngress("ns1", "deny-b", "b"))
	pgA, pgB := netpol.PortGroupName("ns1/deny-a"), netpol.PortGroupName("ns1/deny-b")
	mover := waitRow(e, "port of ns1/mover", lspNamed(contract.PodPort("ns1", "mover"))).UUID
	in := func(pg string) func(*nbdb.PortGroup) bool {
		return func(r *nbdb.PortGroup) bool {
			if r.Name == pgA || r.Name == pgB {
				has := false
				for _, p := range r.Ports {
					has = has || p == mover
				}
				return has == (r.Name == pg)
			}
			return false
		}
	}
	// in(pgA) also holds for pgB without the mover, which may come first: wait for pgA's row
	// itself, or the monitor could start before the mover is in any group.
	waitRow(e, "mover in "+pgA, func(r *nbdb.PortGroup) bool { return r.Name == pgA && in(pgA)(r) })
	mon := e.startPGMonitor()
	kubetest.Eventually(t, "the monitor's initial state", func() (bool, string) {
		states, err := mon.snapshot()
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})

	const moves = 20
	app := "a"
	for i := 0; i < moves; i++ {
		app = map[string]string{"a": "b", "b": "a"}[app]
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app))
		if _, err := e.kube.CoreV1().Pods("ns1").Patch(e.ctx, "mover", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"a": pgA, "b": pgB}[app]
		kubetest.Eventually(t, fmt.Sprintf("move %d: mover only in %s", i+1, want), func() (bool, string) {
			states, err := mon.snapshot()
			if err != nil || len(states) == 0 {
				return false, fmt.Sprint(err)
			}
			last := states[len(states)-1]
			return last[want][mover] && !last[map[string]string{pgA: pgB, pgB: pgA}[want]][mover], fmt.Sprint(last)
		})
	}
	states, err := mon.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var gaps []string
	for i, s := range states {
		if !s[pgA][mover] && !s[pgB][mover] {
			gaps = append(gaps, fmt.Sprint(i))
		}
	}
	if len(gaps) > 0 {
		t.Errorf("over %d moves, %d of %d committed NB states had the pod in no policy's port group (states %s)",
			moves, len(gaps), len(states), strings.Join(gaps, ", "))
	}
	t.Logf("%d moves, %d committed port group states observed", moves, len(states))

	// Two pods swapping policies at once: each policy's sync needs the other first. Both
	// converge, and neither pod is ever in no port group.
	other := waitRow(e, "port of ns1/stay-b", lspNamed(contract.PodPort("ns1", "stay-b"))).UUID
	from := len(states)
	label := func(pod, app string) {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app))
		if _, err := e.kube.CoreV1().Pods("ns1").Patch(e.ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// mover is in b now (an even number of moves from a).
	for i := 0; i < 10; i++ {
		moverApp, otherApp := map[bool]string{true: "a", false: "b"}[i%2 == 0], map[bool]string{true: "b", false: "a"}[i%2 == 0]
		label("mover", moverApp)
		label("stay-b", otherApp)
		pg := map[string]string{"a": pgA, "b": pgB}
		kubetest.Eventually(t, fmt.Sprintf("swap %d: mover only in %s, stay-b only in %s", i+1, pg[moverApp], pg[otherApp]), func() (bool, string) {
			states, err := mon.snapshot()
			if err != nil || len(states) == 0 {
				return false, fmt.Sprint(err)
			}
			last := states[len(states)-1]
			ok := last[pg[moverApp]][mover] && !last[pg[otherApp]][mover] && last[pg[otherApp]][other] && !last[pg[moverApp]][other]
			return ok, fmt.Sprint(last)
		})
	}
	states, err = mon.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range states[from:] {
		for name, port := range map[string]string{"mover": mover, "stay-b": other} {
			if !s[pgA][port] && !s[pgB][port] {
				t.Errorf("swaps: committed state %d has %s in no policy's port group", from+i, name)
			}
		}
	}
}
