//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestRunFailsOver runs two ovnt-master commands against a real API server and NB with
// leader election: one writes, the other waits; when the first stops (as on SIGTERM) it
// releases the Lease and the second takes over and serves.
func TestRunFailsOver(t *testing.T) {
	harness.Require(t, "ovsdb-server", "ovn-northd", "ovn-nbctl", "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	central, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := r.StartKube(ctx, harness.KubeOptions{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	client := kube.Client()
	start := func() (context.CancelFunc, chan error) {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- newApp().RunContext(runCtx, []string{"ovnt-master", "--kubeconfig", kube.Kubeconfig,
				"--nb-address", central.NBRemote, "--leader-elect-namespace", "default", "--resync-period", "0"})
		}()
		return stop, done
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if err := harness.WaitFor(wctx, what, 100*time.Millisecond, func() (bool, error) { return cond(), nil }); err != nil {
			t.Fatal(err)
		}
	}
	holder := func() string {
		l, err := client.CoordinationV1().Leases("default").Get(ctx, "ovnt-master", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	nodeServed := func(name string) func() bool {
		return func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			out, _ := central.NBCtl(ctx, "--bare", "--columns=name", "find", "logical_switch", "name="+name)
			return err == nil && n.Annotations[contract.NodeSubnetKey] != "" && strings.TrimSpace(out) == name
		}
	}
	createNode := func(name string) {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	stopA, doneA := start()
	wait("master A leads", func() bool { return holder() != "" })
	first := holder()
	createNode("node1")
	wait("node1 served", nodeServed("node1"))
	stopB, doneB := start()
	defer func() { stopB(); <-doneB }()
	time.Sleep(3 * time.Second) // B tries to acquire a held Lease at least once
	if h := holder(); h != first {
		t.Fatalf("Lease holder %q, want A %q still", h, first)
	}

	stopA()
	if err := <-doneA; err != nil {
		t.Errorf("master A on shutdown: %v", err)
	}
	wait("master B leads", func() bool { h := holder(); return h != "" && h != first })
	createNode("node2")
	wait("node2 served by B", nodeServed("node2"))
}
