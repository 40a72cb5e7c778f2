//go:build linux

package kubelet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/kubelet"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// testNode is one node of the test: a plain network namespace with the node IP on its
// loopback, the fake plugin's configuration and state, and its kubelet.
type testNode struct {
	name, ip, netns, confDir, stateDir string
	cfg                                kubelet.Config
	kl                                 *kubelet.Kubelet
}

// restart stops the node's kubelet and starts a new one with the same configuration, as a
// kubelet restart (or a node reboot) does.
func (n *testNode) restart(t *testing.T, ctx context.Context) {
	t.Helper()
	n.kl.Stop()
	var err error
	if n.kl, err = kubelet.New(n.cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.kl.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) calls(t *testing.T) []fakeCall {
	t.Helper()
	f, err := os.Open(filepath.Join(n.stateDir, "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []fakeCall
	for s := bufio.NewScanner(f); s.Scan(); {
		var c fakeCall
		if err := json.Unmarshal(s.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	return calls
}

// podCalls are the calls whose CNI_ARGS name the pod.
func (n *testNode) podCalls(t *testing.T, pod string) []fakeCall {
	var out []fakeCall
	for _, c := range n.calls(t) {
		if strings.Contains(c.Args, ";K8S_POD_NAME="+pod+";") {
			out = append(out, c)
		}
	}
	return out
}

func (n *testNode) setFailure(t *testing.T, which, msg string) {
	t.Helper()
	path := filepath.Join(n.stateDir, which)
	if msg == "" {
		os.Remove(path)
		return
	}
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func startNode(t *testing.T, ctx context.Context, r *harness.Run, c kubernetes.Interface, binDir, workload, name, ip, subnet, osLabel string) *testNode {
	t.Helper()
	n := &testNode{name: name, ip: ip, confDir: t.TempDir(), stateDir: t.TempDir()}
	var err error
	if n.netns, err = r.AddNetns(name); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.Exec(ctx, n.netns, "ip", "addr", "add", ip+"/32", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "ovnt-test", "plugins": [
		{"type": %q, "stateDir": %q, "subnet": %q, "nodeIP": %q}]}`, fakeCNIType, n.stateDir, subnet, ip)
	if err := os.WriteFile(filepath.Join(n.confDir, "10-ovnt-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n.cfg = kubelet.Config{
		NodeName: name, Netns: n.netns, NodeIP: ip, Client: c, Run: r,
		CNIBinDirs: []string{binDir}, CNIConfDir: n.confDir, WorkloadPath: workload,
		OS: osLabel, StatusInterval: 500 * time.Millisecond,
	}
	n.kl, err = kubelet.New(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.kl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func testPod(name, node string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			// Through the scheduler, pinned by label as a user would pin it.
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "main", Image: "ovnt-workload", Ports: ports}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The kubelet tests' patience: every wait here is for something the kubelet does on its own
// within seconds.
const (
	waitTimeout  = 45 * time.Second
	waitInterval = 20 * time.Millisecond
)

// createReady creates pod and waits until it is Ready; it returns the pod and how long that
// took from the create call.
func createReady(t *testing.T, ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) (*corev1.Pod, time.Duration) {
	t.Helper()
	start := time.Now()
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	poll.Eventually(t, ctx, "pod "+pod.Name+" Ready", waitTimeout, waitInterval, func() (bool, error) {
		var err error
		got, err = c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && podReady(got), err
	})
	return got, time.Since(start)
}

func waitPodGone(t *testing.T, ctx context.Context, c kubernetes.Interface, name string) {
	t.Helper()
	poll.Eventually(t, ctx, "pod "+name+" gone", waitTimeout, waitInterval, func() (bool, error) {
		_, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// deleteAndWait deletes a pod gracefully and waits until the kubelet has finished the deletion.
func deleteAndWait(t *testing.T, ctx context.Context, c kubernetes.Interface, name string) {
	t.Helper()
	if err := c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ctx, c, name)
}

func waitEvent(t *testing.T, ctx context.Context, c kubernetes.Interface, pod, reason, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	poll.Eventually(t, ctx, reason+" event for "+pod, waitTimeout, waitInterval, func() (bool, error) {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, contains) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func nodeReadyCondition(t *testing.T, ctx context.Context, c kubernetes.Interface, name string) corev1.NodeCondition {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond
		}
	}
	return corev1.NodeCondition{}
}

func waitNodeReady(t *testing.T, ctx context.Context, c kubernetes.Interface, name string, want corev1.ConditionStatus, msg string) {
	t.Helper()
	poll.Eventually(t, ctx, "node "+name+" Ready="+string(want), waitTimeout, waitInterval, func() (bool, error) {
		cond := nodeReadyCondition(t, ctx, c, name)
		return cond.Status == want && strings.Contains(cond.Message, msg), nil
	})
}

// inNetns runs a probe from inside a network namespace.
func inNetns(t *testing.T, ctx context.Context, netns string, fn func(context.Context) (string, error)) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var line string
	if err := harness.InNetns(netns, func() error {
		var err error
		line, err = fn(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return line
}

func wantAnswer(t *testing.T, what, line, name, client string) {
	t.Helper()
	gotName, gotClient, err := probe.ParseLine(line)
	if err != nil || gotName != name || gotClient.String() != client {
		t.Errorf("%s: answer %q (%v), want %q from %s", what, line, err, name, client)
	}
}

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

func callWith(calls []fakeCall, cmd, containerID string) bool {
	for _, c := range calls {
		if c.Cmd == cmd && (containerID == "" || c.ContainerID == containerID) {
			return true
		}
	}
	return false
}

func tcpPort(p int32) corev1.ContainerPort { return corev1.ContainerPort{ContainerPort: p} }
