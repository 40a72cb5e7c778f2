//go:build linux

package deployreal

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	ovntimages "github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// checkRollingRestart restarts the Linux DaemonSet as `kubectl rollout restart` does (one
// node at a time: Open vSwitch, ovn-controller and the agent all restart) while a TCP
// connection between pods on the two nodes carries data; the connection must survive, and
// the pods still reach each other and the Service.
func (d *deployment) checkRollingRestart(ctx context.Context, w *workloads) {
	t := d.t
	s := w.startStream(ctx, t)
	before := d.nodePods(ctx)
	patch := `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"` + time.Now().Format(time.RFC3339) + `"}}}}}`
	apps := d.c.Kube.Client().AppsV1()
	if _, err := apps.DaemonSets(ovntimages.Namespace).Patch(ctx, "ovnt-node-linux", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d.waitRolledOut(ctx)
	poll.Eventually(t, ctx, "every node agent pod replaced", 3*time.Minute, time.Second, func() (bool, error) {
		now := d.nodePods(ctx)
		for uid := range now {
			if before[uid] {
				return false, nil
			}
		}
		return len(now) == len(d.c.Nodes), nil
	})
	d.waitRolledOut(ctx)
	t.Logf("DaemonSet rolled out again (every pod replaced) in %s", time.Since(start).Round(time.Second))
	s.alive(ctx, t, "after the DaemonSet's rolling restart")
	d.checkChassis(ctx, "after the rolling restart")
	w.checkFlows(ctx, t)
}

// checkChassis: every node's chassis is named and hostnamed after its node, in the node's
// Open_vSwitch table and in the SB. The SB's RBAC lets a chassis set its hostname only when it
// registers: a hostname changed afterwards (ovs-ctl recording the machine's) fails every SB
// transaction of its ovn-controller, and new pods on that node are never bound.
func (d *deployment) checkChassis(ctx context.Context, when string) {
	d.t.Helper()
	for _, n := range d.c.Nodes {
		ovs, err := n.VSCtl(ctx, "--if-exists", "get", "Open_vSwitch", ".", "external_ids:system-id", "external_ids:hostname")
		if err != nil {
			d.t.Fatal(err)
		}
		sb, err := d.c.Central.SBCtl(ctx, "--if-exists", "get", "Chassis", n.Name, "hostname")
		if err != nil {
			d.t.Fatal(err)
		}
		if got, want := strings.Fields(strings.ReplaceAll(ovs, `"`, "")), []string{n.Name, n.Name}; strings.Join(got, " ") != strings.Join(want, " ") {
			d.t.Errorf("%s: node %s: Open_vSwitch system-id and hostname %v, want %v", when, n.Name, got, want)
		}
		if got := strings.Trim(strings.TrimSpace(sb), `"`); got != n.Name {
			d.t.Errorf("%s: node %s: SB Chassis hostname %q, want %q", when, n.Name, got, n.Name)
		}
	}
}

// nodePods returns the UIDs of the Linux DaemonSet's pods that are Ready.
func (d *deployment) nodePods(ctx context.Context) map[types.UID]bool {
	pods, err := d.c.Kube.Client().CoreV1().Pods(ovntimages.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnt-node"})
	if err != nil {
		d.t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				uids[p.UID] = true
			}
		}
	}
	return uids
}

// checkMasterFailover deletes the pod of the master that holds the Lease: the other takes
// the Lease, and a pod created afterwards is wired (reachable through the Service's pod
// selector's new member from the other node).
func (d *deployment) checkMasterFailover(ctx context.Context, w *workloads) {
	t := d.t
	client := d.c.Kube.Client()
	holder := func() string { return leaseHolder(ctx, client) }
	leader := holder()
	if leader == "" {
		t.Fatal("no master holds the Lease ovn-transparent/ovnt-master")
	}
	pods, err := client.CoreV1().Pods(ovntimages.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnt-master"})
	if err != nil {
		t.Fatal(err)
	}
	var leaderPod string
	for _, p := range pods.Items {
		b, _ := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if strings.Contains(string(b), leader) && strings.Contains(string(b), "Leading") {
			leaderPod = p.Name
		}
	}
	if leaderPod == "" {
		t.Fatalf("no master pod's log says it leads as %s", leader)
	}
	if err := client.CoreV1().Pods(ovntimages.Namespace).Delete(ctx, leaderPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll.Eventually(t, ctx, "another master holds the Lease", 2*time.Minute, time.Second, func() (bool, error) {
		h := holder()
		return h != "" && h != leader, nil
	})
	t.Logf("leader pod %s deleted: another master leads after %s", leaderPod, time.Since(start).Round(time.Second))
	webC := netexec("demo", "web-c", d.c.Nodes[1].Name)
	if _, err := client.CoreV1().Pods("demo").Create(ctx, webC, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := d.c.WaitPodReady(ctx, t, "demo", "web-c", 3*time.Minute).Status.PodIP
	// Ready is the kubelet's probe from web-c's own node; the other node's ovn-controller
	// learns the new port from the SB shortly after.
	start = time.Now()
	poll.Eventually(t, ctx, "client-1 (other node) reaches the new pod web-c after the failover", 30*time.Second, time.Second, func() (bool, error) {
		ok, _ := w.connects(ctx, "demo/client-1", ip+":8080")
		return ok, nil
	})
	t.Logf("web-c reached from the other node %s after it was Ready", time.Since(start).Round(time.Second))
	d.waitRolledOut(ctx)
}

// leaseHolder returns the identity of the master holding the Lease ovn-transparent/ovnt-master,
// or "".
func leaseHolder(ctx context.Context, client kubernetes.Interface) string {
	l, err := client.CoordinationV1().Leases(ovntimages.Namespace).Get(ctx, "ovnt-master", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
