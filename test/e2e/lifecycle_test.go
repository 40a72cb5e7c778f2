//go:build linux

package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
)

func waitNoRows(t *testing.T, kind nb.Kind, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows []nbRow
	if err := poll.Until(ctx, "no NB rows of "+string(kind)+" "+name, 100*time.Millisecond, func() (bool, error) {
		rows = rowsOwnedBy(t, kind, name)
		return len(rows) == 0, nil
	}); err != nil {
		t.Fatalf("%v: %v", err, rows)
	}
}

// TestPodRecreate: a deleted pod loses its logical port, and a pod of the same name created
// again gets working networking.
func TestPodRecreate(t *testing.T) {
	ns := testNamespace(t)
	peer := startPod(t, podSpec(ns, "peer", "node2"))
	a := startPod(t, podSpec(ns, "a", "node1"))
	if len(rowsOwnedBy(t, nb.Pod, ns+"/a")) != 1 {
		t.Fatalf("pod a: want one owned NB row, have %v", rowsOwnedBy(t, nb.Pod, ns+"/a"))
	}
	deletePod(t, ns, "a")
	waitNoRows(t, nb.Pod, ns+"/a")
	a = startPod(t, podSpec(ns, "a", "node1"))
	expectAnswer(t, podNetns(t, peer), a.Status.PodIP, ns+"/a", netip.MustParseAddr(peer.Status.PodIP))
	expectAnswer(t, podNetns(t, a), peer.Status.PodIP, ns+"/peer", netip.MustParseAddr(a.Status.PodIP))
	checkNBConsistent(t)
}

// TestNodeAgentRestart: killing ovnt-node does not interrupt the pods it set up, and after a
// restart a new pod works.
func TestNodeAgentRestart(t *testing.T) {
	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", "node1"))
	c := startPod(t, podSpec(ns, "c", "node2"))
	n1 := cl.Node("node1")
	n1.KillAgent()
	expectAnswer(t, podNetns(t, c), a.Status.PodIP, ns+"/a", netip.MustParseAddr(c.Status.PodIP))
	expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", netip.MustParseAddr(a.Status.PodIP))
	if err := n1.StartAgent(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitNodesReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := startPod(t, podSpec(ns, "d", "node1"))
	expectAnswer(t, podNetns(t, c), d.Status.PodIP, ns+"/d", netip.MustParseAddr(c.Status.PodIP))
	expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", netip.MustParseAddr(a.Status.PodIP))
}

// TestMasterRestart: pods deleted and created while the master is down are reconciled when it
// comes back, with no duplicate and no stale row in NB.
func TestMasterRestart(t *testing.T) {
	ns := testNamespace(t)
	gone := startPod(t, podSpec(ns, "gone", "node1"))
	stay := startPod(t, podSpec(ns, "stay", "node2"))
	before := rowSet(t, ns)

	cl.KillMaster()
	deletePod(t, ns, gone.Name) // the kubelet's DEL does not need the master
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := client().CoreV1().Pods(ns).Create(ctx, cluster.Workload(podSpec(ns, "late", "node1")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartMaster(ctx); err != nil {
		t.Fatal(err)
	}
	late := waitPodReady(t, ctx, ns, "late")
	waitNoRows(t, nb.Pod, ns+"/gone")
	expectAnswer(t, podNetns(t, late), stay.Status.PodIP, ns+"/stay", netip.MustParseAddr(late.Status.PodIP))
	checkNBConsistent(t)
	want := map[string]bool{}
	for k := range before {
		if !strings.Contains(k, "|"+ns+"/gone|") {
			want[k] = true
		}
	}
	for k := range rowSet(t, ns) {
		if strings.Contains(k, "|"+ns+"/late|") {
			want[k] = true
		}
	}
	compareRowSets(t, "after the restart", want, rowSet(t, ns))
	// A second restart with nothing changed writes nothing new.
	if err := cl.StopMaster(); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartMaster(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let it run its start-up reconcile
	checkNBConsistent(t)
	compareRowSets(t, "after an idle restart", want, rowSet(t, ns))
}

// TestNodeDeleted: a Node deleted from the API loses every NB row, and its subnet goes back
// to the pool (the next new Node gets it).
func TestNodeDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const victim = "node3"
	n, err := client().CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subnet := n.Annotations[contract.NodeSubnetKey]
	if subnet == "" || len(rowsOwnedBy(t, nb.Node, victim)) == 0 {
		t.Fatalf("%s has no subnet (%q) or no NB rows before the test", victim, subnet)
	}
	if err := client().CoreV1().Nodes().Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoRows(t, nb.Node, victim)
	checkNBConsistent(t)

	// A Node with no agent behind it: the master still gives it a subnet and a switch.
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-fresh"}}
	if _, err := client().CoreV1().Nodes().Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer client().CoreV1().Nodes().Delete(context.Background(), fresh.Name, metav1.DeleteOptions{})
	var got string
	if err := poll.Until(ctx, "a subnet for node-fresh", 100*time.Millisecond, func() (bool, error) {
		n, err := client().CoreV1().Nodes().Get(ctx, fresh.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = n.Annotations[contract.NodeSubnetKey]
		return got != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != subnet {
		t.Errorf("node-fresh got subnet %s, want %s, the one freed by deleting %s", got, subnet, victim)
	}
}
