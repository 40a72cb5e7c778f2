//go:build linux

package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/controller"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestMasterLeaderElectionAsServiceAccount runs two ovnt-master processes as the master
// Deployment does: as the ovnt-master ServiceAccount, with leader election on the Lease
// ovn-transparent/ovnt-master. One leads and serves a node while the other waits; when the
// first stops (SIGTERM, as at a rollout) it releases the Lease, exits cleanly, and the other
// takes over and serves the next node. The Role's create, get and update of that one Lease
// are all used (the end-to-end cluster runs one master without leader election). The
// Warning Events the master writes on bad input are checked too. (This is the one failover
// test: it runs the binary as deployed, signals and RBAC included.)
func TestMasterLeaderElectionAsServiceAccount(t *testing.T) {
	harness.Require(t, "ovsdb-server", "ovn-northd", "ovn-nbctl", "etcd")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	binDir, err := cluster.BinDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := harness.NewTestRun(t)
	central, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kube := apiServerWithRBAC(ctx, t, r)
	kubeconfig := r.Path("kubeconfig-ovnt-master")
	if err := cluster.ServiceAccountKubeconfig(ctx, kube, images.MasterServiceAccount, kubeconfig); err != nil {
		t.Fatal(err)
	}
	healthURL := map[string]string{}
	start := func(name string, extra ...string) *harness.Proc {
		health, err := harness.FreeLocalAddr()
		if err != nil {
			t.Fatal(err)
		}
		healthURL[name] = "http://" + health
		p, err := r.Start(harness.ProcSpec{Name: name, Path: filepath.Join(binDir, "ovnt-master"), Args: append(append(central.MasterArgs(),
			"--kubeconfig", kubeconfig, "--resync-period", "0", "--health-address", health,
			"--leader-elect", "--leader-elect-namespace", images.Namespace, "--leader-elect-name", "ovnt-master",
		), extra...)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	client := kube.Client()
	wait := func(what string, cond func() bool) {
		t.Helper()
		poll.Eventually(t, ctx, what, time.Minute, 100*time.Millisecond, func() (bool, error) { return cond(), nil })
	}
	holder := func() string {
		l, err := client.CoordinationV1().Leases(images.Namespace).Get(ctx, "ovnt-master", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	served := func(name string) func() bool {
		return func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			out, _ := central.NBCtl(ctx, "--bare", "--columns=name", "find", "logical_switch", "name="+name)
			return err == nil && n.Annotations[contract.NodeSubnetKey] != "" && strings.TrimSpace(out) == name
		}
	}
	createNode := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	a := start("ovnt-master-a")
	wait("a master leads", func() bool { return holder() != "" })
	first := holder()
	createNode("node1")
	wait("node1 served", served("node1"))

	b := start("ovnt-master-b")
	defer b.Stop()
	time.Sleep(3 * time.Second) // b tries to acquire the held Lease at least once
	if h := holder(); h != first {
		t.Fatalf("Lease holder %q, want the first master %q still", h, first)
	}
	// Both are ready (the standby could take over), and their metrics say who leads; the
	// leader's say it converged node1 through the NB.
	wait("both masters ready, a leading, b standing by", func() bool {
		return get(healthURL["ovnt-master-a"]+"/readyz") == "ok\n" && get(healthURL["ovnt-master-b"]+"/readyz") == "ok\n" &&
			strings.Contains(get(healthURL["ovnt-master-a"]+"/metrics"), "\novnt_master_leader 1\n") &&
			strings.Contains(get(healthURL["ovnt-master-b"]+"/metrics"), "\novnt_master_leader 0\n")
	})
	if m := get(healthURL["ovnt-master-a"] + "/metrics"); !strings.Contains(m, `ovnt_master_event_to_nb_seconds_count{kind="Node"}`) ||
		!strings.Contains(m, `ovnt_master_nb_operations_total{op="insert",table="Logical_Switch"}`) ||
		!strings.Contains(m, `ovnt_master_ipam_node_subnets{state="used"} 1`) {
		t.Errorf("the leader's metrics lack its work on node1:\n%s", m)
	}
	if got := get(healthURL["ovnt-master-a"] + "/healthz"); got != "ok\n" {
		t.Errorf("leader /healthz: %q", got)
	}
	// A master that cannot reach the NB (the last --nb-address wins) is alive, not ready,
	// and says why.
	c := start("ovnt-master-c", "--nb-address", "ssl:127.0.0.1:1")
	wait("the master without an NB alive and not ready", func() bool {
		return get(healthURL["ovnt-master-c"]+"/healthz") == "ok\n" &&
			strings.HasPrefix(get(healthURL["ovnt-master-c"]+"/readyz"), "503 ") &&
			strings.Contains(get(healthURL["ovnt-master-c"]+"/readyz"), "NB")
	})
	if err := c.Stop(); err != nil {
		t.Logf("stopping the master without an NB: %v", err)
	}
	if err := a.Stop(); err != nil {
		t.Logf("stopping the first master: %v", err)
	}
	if err := a.Err(); err != nil {
		t.Errorf("the first master on SIGTERM: %v, want a clean exit", err)
	}
	wait("the second master leads", func() bool { h := holder(); return h != "" && h != first })
	wait("the second master's metrics say it leads", func() bool {
		return strings.Contains(get(healthURL["ovnt-master-b"]+"/metrics"), "\novnt_master_leader 1\n")
	})
	createNode("node2")
	wait("node2 served by the second master", served("node2"))

	// Bad input becomes a Warning Event, which the account may write.
	bad := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node3", Annotations: map[string]string{contract.NodeSubnetKey: "not a subnet"}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("a Warning Event on node3", func() bool {
		events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "node3" && e.Type == corev1.EventTypeWarning &&
				e.Reason == controller.ReasonInvalidNodeSubnet && e.Source.Component == controller.Component {
				return true
			}
		}
		return false
	})
}

// get returns the body of an HTTP GET of url, with the status when it is not 200 ("" when
// nothing answers).
func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	return string(b)
}
