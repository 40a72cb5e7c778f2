//go:build linux

package controller

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// ownedRows maps the UUID of every row carrying an owner kind to its marks.
func (e *env) ownedRows() map[string]string {
	e.t.Helper()
	rows := map[string]string{}
	for _, table := range nb.TableNames() {
		if nb.Unmarked(table) {
			for _, line := range e.lines("--format=csv", "--data=bare", "--no-headings", "--columns=_uuid,name", "list", table) {
				uuid, name, _ := strings.Cut(line, ",")
				if id, ok := nb.FromName(table, name); ok {
					rows[uuid] = fmt.Sprintf("%s %s %s %s", table, id.Kind, id.Name, id.Role)
				}
			}
			continue
		}
		for _, line := range e.lines("--format=csv", "--data=bare", "--no-headings", "--columns=_uuid,external_ids", "list", table) {
			uuid, ids, _ := strings.Cut(line, ",")
			marks := map[string]string{}
			for _, kv := range strings.Fields(ids) {
				k, v, _ := strings.Cut(kv, "=")
				marks[k] = v
			}
			if kind, ok := marks[nb.KindKey]; ok {
				rows[uuid] = fmt.Sprintf("%s %s %s %s %s", table, kind, marks[nb.NameKey], marks[nb.RoleKey], marks[nb.ScopeKey])
			}
		}
	}
	return rows
}

// settle waits until m's queue has stayed empty for a while: the master is idle.
func (e *env) settle(m *master) {
	e.t.Helper()
	idle := 0
	e.eventually("an idle master", func() (bool, string) {
		if m.ctrl.queue.Len() == 0 {
			idle++
		} else {
			idle = 0
		}
		return idle >= 10, fmt.Sprintf("%d keys queued", m.ctrl.queue.Len())
	})
}

func markArgs(table, name string, kind nb.Kind, ownerName string, role nb.Role) []string {
	args := []string{"--", "set", table, name}
	for k, v := range nb.NewID(kind, ownerName, role).ExternalIDs() {
		args = append(args, fmt.Sprintf("external_ids:%s=%s", k, v))
	}
	return args
}

// checkRestart: (d) a new master finds the allocations and rows of the old one: no row
// recreated or duplicated, subnets and addresses kept, and a pod created while no master ran
// gets an address nobody holds. Rows it owns that nothing wants go; others' rows stay.
func (e *env) checkRestart(m *master, cfg Config, subnets map[string]netip.Prefix) *master {
	e.t.Helper()
	e.settle(m)
	before := e.ownedRows()
	annC := e.podAnnotation("default", "c")
	m.stop()

	e.nbctl(append([]string{"ls-add", "ghost"}, markArgs("logical_switch", "ghost", nb.Node, "ghost", nb.NodeSwitch)...)...)
	e.nbctl("ls-add", "operator-sw")
	e.nbctl("lsp-add", "node1", "operator-port")
	e.deletePod("default", "d")
	e.createPod("default", "z", "node1", nil)

	m2 := e.startMaster(cfg)
	pc, err := contract.ParsePodNetwork(annC)
	if err != nil {
		e.t.Fatal(err)
	}
	if z := e.podNetwork("default", "z").IPs[0].Addr(); z == pc.IPs[0].Addr() {
		e.t.Errorf("pod z got %s, pod c's address: the allocations were not rebuilt before allocating", z)
	}
	e.waitPort("default_z", true)
	e.waitPort("default_d", false)
	e.eventually("stale switch ghost deleted", func() (bool, string) {
		got := e.nbctl("--bare", "--columns=name", "find", "logical_switch", "name=ghost")
		return got == "", got
	})
	e.settle(m2)
	if !containsFields(strings.Join(e.names("logical_switch"), "\n"), "operator-sw") ||
		!containsFields(strings.Join(portNames(e.nbctl("lsp-list", "node1")), "\n"), "operator-port") {
		e.t.Error("rows without our marks were deleted")
	}
	after := e.ownedRows()
	for uuid, marks := range before {
		if strings.Contains(marks, "default/d") {
			continue
		}
		if after[uuid] != marks {
			e.t.Errorf("row %s (%s) was not kept across the restart", uuid, marks)
		}
	}
	seen := map[string]string{}
	for uuid, marks := range after {
		if other, dup := seen[marks]; dup {
			e.t.Errorf("duplicate rows %s and %s: %s", other, uuid, marks)
		}
		seen[marks] = uuid
	}
	for node, p := range subnets {
		if got := e.nodeSubnet(node); got != p {
			e.t.Errorf("node %s: subnet %s after the restart, was %s", node, got, p)
		}
	}
	if got := e.podAnnotation("default", "c"); got != annC {
		e.t.Errorf("pod c annotation changed across the restart: %s -> %s", annC, got)
	}
	return m2
}

// checkReconnect: rows deleted while the master was disconnected from the NB come back. The
// NB socket is moved away so that the master cannot reconnect while default_c is deleted:
// after the reconnection libovsdb refills its cache without reporting that deletion, so only
// the full resync the refill triggers can bring the port back (periodic resync is off).
func (e *env) checkReconnect(m *master) {
	e.t.Helper()
	e.settle(m)
	refills := m.ctrl.refills.Load()
	sock := strings.TrimPrefix(e.central.NBRemote, "unix:")
	away := sock + ".away"
	if err := os.Rename(sock, away); err != nil {
		e.t.Fatal(err)
	}
	run := func(name string, args ...string) {
		if out, err := exec.CommandContext(e.ctx, name, args...).CombinedOutput(); err != nil {
			os.Rename(away, sock)
			e.t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	run("ovs-appctl", "-t", filepath.Join(e.central.Dir, "nb.ctl"), "ovsdb-server/reconnect")
	run("ovn-nbctl", "--db=unix:"+away, "--timeout=10", "lsp-del", "default_c")
	time.Sleep(500 * time.Millisecond) // the master tries, and fails, to reconnect
	if err := os.Rename(away, sock); err != nil {
		e.t.Fatal(err)
	}
	e.waitPort("default_c", true)
	if m.ctrl.refills.Load() == refills {
		e.t.Error("the master did not see its NB cache refilled; the test did not exercise a reconnection")
	}
}

// checkNodeDeletion: (e) a deleted node's rows all go, including those on shared routers and
// switches, and its subnet is given to the next node.
func (e *env) checkNodeDeletion(subnets map[string]netip.Prefix) {
	e.t.Helper()
	if err := e.kube.CoreV1().Nodes().Delete(e.ctx, "node2", metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("node2's rows deleted", func() (bool, string) {
		for uuid, marks := range e.ownedRows() {
			if strings.Contains(marks, " Node node2 ") {
				return false, uuid + " " + marks
			}
		}
		return true, ""
	})
	wantSet(e.t, "switches", e.names("logical_switch"), "ext_node1", "join", "node1", "operator-sw")
	wantSet(e.t, "routers", e.names("logical_router"), "GR_node1", "ovn_cluster_router")
	if cr := e.nbctl("lr-route-list", "ovn_cluster_router"); strings.Contains(cr, subnets["node2"].String()) {
		e.t.Errorf("node2's route left on the cluster router:\n%s", cr)
	}
	if ports := portNames(e.nbctl("lsp-list", "join")); len(ports) != 2 {
		e.t.Errorf("join switch ports %v, want the cluster router's and GR_node1's", ports)
	}
	e.createNode("node3", chassisOf(3))
	if got := e.nodeSubnet("node3"); got != subnets["node2"] {
		e.t.Errorf("node3 got %s, want node2's freed %s", got, subnets["node2"])
	}
	e.waitPort("k8s-node3", true)
}
