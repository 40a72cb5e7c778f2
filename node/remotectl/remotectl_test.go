//go:build linux

package remotectl

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-transparent/ovn-transparent/node/chassisrelay"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

func node(name string, labels map[string]string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

// certDir makes <node>.crt and .key for each node and ca.crt (contents do not matter to Desired).
func certDir(t *testing.T, nodes ...string) string {
	dir := t.TempDir()
	files := []string{CAFile}
	for _, n := range nodes {
		files = append(files, n+".crt", n+".key")
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestIsRemote(t *testing.T) {
	win := map[string]string{corev1.LabelOSStable: "windows"}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{corev1.LabelOSStable: "linux"}, false},
		{win, true},
		{map[string]string{corev1.LabelOSStable: "windows", LabelRemote: "false"}, false},
		{map[string]string{corev1.LabelOSStable: "linux", LabelRemote: "true"}, true},
		{map[string]string{LabelRemote: "true"}, true},
		{map[string]string{corev1.LabelOSStable: "windows", LabelRemote: "yes"}, true},
	} {
		if got := IsRemote(node("n", tc.labels)); got != tc.want {
			t.Errorf("IsRemote(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestDesired(t *testing.T) {
	dir := certDir(t, "win1")
	win := map[string]string{corev1.LabelOSStable: "windows"}

	spec, ok, err := Desired(node("win1", win, "10.0.0.5", "10.0.0.6"), dir)
	want := Spec{Node: "win1", Address: "10.0.0.5", CertFile: filepath.Join(dir, "win1.crt"),
		KeyFile: filepath.Join(dir, "win1.key"), CAFile: filepath.Join(dir, "ca.crt")}
	if !ok || err != nil || spec != want {
		t.Errorf("win1: %+v %v %v, want %+v", spec, ok, err, want)
	}
	if _, ok, err := Desired(node("lin", nil, "10.0.0.7"), dir); ok || err != nil {
		t.Errorf("a Linux node: remote %v %v, want not remote", ok, err)
	}
	// Remote, but no certificate of its own: an error naming the file.
	_, ok, err = Desired(node("win2", win, "10.0.0.8"), dir)
	if !ok || !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "win2.crt") {
		t.Errorf("win2 without certificate: remote %v, error %v; want remote and an error naming win2.crt", ok, err)
	}
	// Remote, no InternalIP yet.
	_, ok, err = Desired(node("win1", win), dir)
	if !ok || err == nil || !strings.Contains(err.Error(), "InternalIP") {
		t.Errorf("win1 without address: remote %v, error %v", ok, err)
	}
	os.Remove(filepath.Join(dir, CAFile))
	if _, _, err := Desired(node("win1", win, "10.0.0.5"), dir); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("without ca.crt: %v", err)
	}
}

// fakeController is a child that appends "<address> <pid>" to <dir>/starts and then runs
// script (a shell command).
func fakeController(script string) func(Spec, string) *exec.Cmd {
	return func(spec Spec, dir string) *exec.Cmd {
		return exec.Command("sh", "-c", `echo "$1 $$" >> "$2/../`+"starts-"+`$3"; `+script, "sh", spec.Address, dir, spec.Node)
	}
}

func newTestSupervisor(t *testing.T, script string) (*Supervisor, string) {
	run := t.TempDir()
	s := NewSupervisor(Config{RunDir: run, OVSDBPort: 6640, OpenFlowPort: 6653, Plaintext: true,
		Command: fakeController(script), MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		StopTimeout: 2 * time.Second, Logger: logr.Discard()})
	t.Cleanup(s.StopAll)
	return s, run
}

func starts(t *testing.T, run, node string) []string {
	data, err := os.ReadFile(filepath.Join(run, "starts-"+node))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(data), "\n", " "))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// TestSupervisorRestartsAnExitedController: a controller that exits is started again, each
// time with the relays' sockets in its run directory.
func TestSupervisorRestartsAnExitedController(t *testing.T) {
	s, run := newTestSupervisor(t, `test -S "$2/db.sock" && test -S "$2/br-int.mgmt" && test "$OVS_RUNDIR" = "$2" && exit 3`)
	s.Set(Spec{Node: "win1", Address: "127.0.0.1"})
	waitFor(t, "three starts", func() bool { return len(starts(t, run, "win1")) >= 6 })
	if _, err := os.Stat(filepath.Join(run, "win1")); err != nil {
		t.Errorf("run directory: %v", err)
	}
}

// TestSupervisorStopsOnRemoval: Remove stops the running controller with SIGTERM and removes
// its run directory; Set with the same spec does not restart it, with another address does.
func TestSupervisorStopsOnRemoval(t *testing.T) {
	s, run := newTestSupervisor(t, `exec sleep 600`)
	spec := Spec{Node: "win1", Address: "127.0.0.1"}
	s.Set(spec)
	var pid int
	waitFor(t, "a running controller", func() bool { pid = s.Running()["win1"]; return pid != 0 })
	s.Set(spec)
	time.Sleep(200 * time.Millisecond)
	if got := s.Running()["win1"]; got != pid {
		t.Errorf("the same spec again restarted the controller (pid %d, then %d)", pid, got)
	}
	spec.Address = "127.0.0.2"
	s.Set(spec)
	waitFor(t, "the controller restarted for the new address", func() bool {
		st := starts(t, run, "win1")
		return len(st) == 4 && st[2] == "127.0.0.2" && !alive(pid)
	})
	pid = 0
	waitFor(t, "the new controller running", func() bool { pid = s.Running()["win1"]; return pid != 0 })
	s.Remove("win1")
	waitFor(t, "the controller gone and its run directory removed", func() bool {
		_, err := os.Stat(filepath.Join(run, "win1"))
		return !alive(pid) && errors.Is(err, os.ErrNotExist)
	})
	if _, ok := s.Running()["win1"]; ok {
		t.Error("a removed node is still listed")
	}

	// Removed and set again at once: the new controller starts after the old one has
	// removed the run directory, and keeps its own.
	waitFor(t, "a running controller", func() bool { s.Set(spec); pid = s.Running()["win1"]; return pid != 0 })
	s.Remove("win1")
	s.Set(spec)
	waitFor(t, "the next controller running", func() bool { p := s.Running()["win1"]; return p != 0 && p != pid })
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(run, "win1", chassisrelay.DBSocket)); err != nil {
		t.Errorf("the new controller's socket: %v", err)
	}
}

// TestSupervisorStopAll: StopAll returns after every controller has exited.
func TestSupervisorStopAll(t *testing.T) {
	s, _ := newTestSupervisor(t, `exec sleep 600`)
	s.Set(Spec{Node: "a", Address: "127.0.0.1"})
	s.Set(Spec{Node: "b", Address: "127.0.0.1"})
	var pids []int
	waitFor(t, "two running controllers", func() bool {
		r := s.Running()
		pids = []int{r["a"], r["b"]}
		return r["a"] != 0 && r["b"] != 0
	})
	s.StopAll()
	for _, pid := range pids {
		// Reaped by the supervisor: gone, not a zombie.
		if alive(pid) {
			t.Errorf("pid %d still there after StopAll", pid)
		}
	}
}

// TestManagerFollowsNodes: a remote node gets a controller, a remote node without its
// certificate gets an Event naming the file and no controller (the others keep theirs), a
// node labelled not remote loses its controller.
func TestManagerFollowsNodes(t *testing.T) {
	s, _ := newTestSupervisor(t, `exec sleep 600`)
	certs := certDir(t, "win1", "lin1")
	win := map[string]string{corev1.LabelOSStable: "windows"}
	kube := fake.NewClientset(node("win1", win, "127.0.0.1"), node("win2", win, "127.0.0.1"),
		node("lin1", map[string]string{LabelRemote: "true"}, "127.0.0.1"), node("lin2", nil, "127.0.0.1"))
	rec := record.NewFakeRecorder(10)
	m := &Manager{Kube: kube, Recorder: rec, CertDir: certs, Supervisor: s, Resync: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "controllers for win1 and lin1", func() bool {
		r := s.Running()
		return len(r) == 2 && r["win1"] != 0 && r["lin1"] != 0 && m.Ready() == nil
	})
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, ReasonUnavailable) || !strings.Contains(ev, "win2.crt") {
			t.Errorf("event %q, want %s naming win2.crt", ev, ReasonUnavailable)
		}
	case <-time.After(5 * time.Second):
		t.Error("no Event for win2")
	}
	// Resyncs do not repeat it.
	time.Sleep(300 * time.Millisecond)
	if len(rec.Events) != 0 {
		t.Errorf("%d more Events for the same problem", len(rec.Events))
	}

	n, err := kube.CoreV1().Nodes().Get(ctx, "lin1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[LabelRemote] = "false"
	if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, "win1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no controllers left", func() bool { return len(s.Running()) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
