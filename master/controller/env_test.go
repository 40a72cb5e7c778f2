//go:build linux

package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// env is one test's real control plane: kube-apiserver (no controllers, no scheduler: the
// test binds pods and sets their phase, as a kubelet would) and OVN central.
type env struct {
	t       *testing.T
	ctx     context.Context
	r       *harness.Run
	central *harness.OVNCentral
	kube    kubernetes.Interface
}

// in returns e for a subtest: the same cluster, with failures reported on t. The env's helpers
// stop the test they are given, and a subtest must not stop its parent.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func newEnv(t *testing.T, ctx context.Context) *env {
	t.Helper()
	harness.Require(t, "ovsdb-server", "ovn-northd", "ovn-nbctl", "ovn-trace", "etcd")
	r, err := harness.NewRun(harness.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			r.MarkFailed()
		}
		r.Close()
	})
	e := &env{t: t, ctx: ctx, r: r}
	if e.central, err = r.StartOVNCentral(ctx); err != nil {
		t.Fatal(err)
	}
	kube, err := r.StartKube(ctx, harness.KubeOptions{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	e.kube = kube.Client()
	// Without the controller-manager nobody creates the ServiceAccount pod admission wants.
	_, err = e.kube.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// master is one in-process ovnt-master: its own NB connection, event recorder and controller.
type master struct {
	t          *testing.T
	once       sync.Once
	cancel     context.CancelFunc
	done       chan error
	stopEvents func()
	closeNB    func()
	ctrl       *Controller
}

func (e *env) startMaster(cfg Config) *master {
	e.t.Helper()
	nbc, err := nb.Connect(e.ctx, ovsdb.Config{Remotes: e.central.NBRemote})
	if err != nil {
		e.t.Fatal(err)
	}
	recorder, stopEvents := NewEventRecorder(e.kube)
	ctrl, err := New(cfg, e.kube, nbc, recorder, testLogger(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	m := &master{t: e.t, cancel: cancel, done: make(chan error, 1), stopEvents: stopEvents, closeNB: nbc.Close, ctrl: ctrl}
	go func() { m.done <- ctrl.Run(ctx) }()
	e.t.Cleanup(m.stop)
	return m
}

// stop stops the master and waits until it has; later calls do nothing.
func (m *master) stop() {
	m.once.Do(func() {
		m.cancel()
		if err := <-m.done; err != nil {
			m.t.Errorf("master: %v", err)
		}
		m.stopEvents()
		m.closeNB()
	})
}

// testLogger sends the controller's log to t, at V(2), until the test ends.
func testLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() { mu.Lock(); ended = true; mu.Unlock() })
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: 2})
}

func (e *env) nbctl(args ...string) string {
	e.t.Helper()
	out, err := e.central.NBCtl(e.ctx, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// eventually polls cond until it holds, failing the test after 30 s with cond's last word.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	poll.Eventually(e.t, e.ctx, what, 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		ok, msg := cond()
		if ok {
			return true, nil
		}
		return false, errors.New(msg)
	})
}

func (e *env) createNode(name string, chassis *contract.NodeChassisInfo) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if chassis != nil {
		v, err := chassis.Marshal()
		if err != nil {
			e.t.Fatal(err)
		}
		n.Annotations[contract.NodeChassisKey] = v
	}
	if _, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// chassisOf is what the node agent of test node number i publishes.
func chassisOf(i int) *contract.NodeChassisInfo {
	return &contract.NodeChassisInfo{ChassisID: fmt.Sprintf("chassis-%d", i), NodeIP: fmt.Sprintf("172.18.0.%d/24", i),
		GatewayMAC: fmt.Sprintf("0a:58:ac:12:00:%02x", i), NextHop: "172.18.0.254", OS: "linux"}
}

func (e *env) nodeSubnet(name string) netip.Prefix {
	e.t.Helper()
	var p netip.Prefix
	e.eventually("subnet annotation on "+name, func() (bool, string) {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		p, err = contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
		return err == nil, fmt.Sprint(n.Annotations)
	})
	return p
}

func (e *env) createPod(ns, name, node string, podAnnotations map[string]string) *corev1.Pod {
	e.t.Helper()
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: podAnnotations},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	p, err := e.kube.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) deletePod(ns, name string) {
	e.t.Helper()
	zero := int64(0) // no kubelet confirms a graceful deletion here
	if err := e.kube.CoreV1().Pods(ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setPodPhase(ns, name string, phase corev1.PodPhase) {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	p.Status.Phase = phase
	if _, err := e.kube.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// podNetwork waits for the pod-network annotation and returns it parsed.
// twoNodePods creates node1 and node2 (zones, when given, set before the pods) and the pods
// default/a on node1 and default/b on node2, waits for both ports to come up and returns
// their networks.
func (e *env) twoNodePods(zones ...string) (a, b contract.PodNetwork) {
	e.t.Helper()
	e.createNode("node1", chassisOf(1))
	e.createNode("node2", chassisOf(2))
	for i, z := range zones {
		e.setZone(fmt.Sprintf("node%d", i+1), z)
	}
	e.createPod("default", "a", "node1", nil)
	e.createPod("default", "b", "node2", nil)
	a, b = e.podNetwork("default", "a"), e.podNetwork("default", "b")
	e.waitPort("default_a", true)
	e.waitPort("default_b", true)
	return a, b
}

func (e *env) podNetwork(ns, name string) contract.PodNetwork {
	e.t.Helper()
	var pn contract.PodNetwork
	e.eventually("pod-network annotation on "+ns+"/"+name, func() (bool, string) {
		p, err := e.kube.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pn, err = contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey])
		return err == nil, fmt.Sprint(err)
	})
	return pn
}

// waitEvent waits for a Warning Event with reason on the object named name.
func (e *env) waitEvent(name, reason string) {
	e.t.Helper()
	e.eventually("event "+reason+" on "+name, func() (bool, string) {
		l, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) > 0, fmt.Sprintf("%d events", len(l.Items))
	})
}

// trace runs ovn-trace on the SB with --minimal, one --ct=new for each conntrack action on
// a switch-router-switch path, and returns its output.
func (e *env) trace(datapath, flow string) string {
	e.t.Helper()
	e.nbctl("--wait=sb", "sync")
	args := []string{"--db=" + e.central.SBRemote, "--minimal"}
	for range 6 {
		args = append(args, "--ct=new")
	}
	out, err := exec.CommandContext(e.ctx, "ovn-trace", append(args, datapath, flow)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("ovn-trace %s %q: %v\n%s", datapath, flow, err, out)
	}
	return string(out)
}
