//go:build linux

package kubelet_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/kubelet"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

func TestMain(m *testing.M) {
	if os.Getenv("CNI_COMMAND") != "" {
		fakeCNIMain()
	}
	os.Exit(m.Run())
}

// TestKubelet runs two kubelets against a real control plane (scheduler, controller-manager)
// with the fake CNI plugin, and checks what the network plugin and the tests rely on: Node
// registration and readiness, the pod lifecycle through CNI, the status and EndpointSlice
// that follow, and the failure paths (ADD failing, STATUS failing, force deletion).
func TestKubelet(t *testing.T) {
	harness.Require(t, "ip", "etcd", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	workload, err := kubelet.BuildWorkload(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := harness.NewTestRun(t)
	kube, err := r.StartKube(ctx, harness.KubeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := kube.Client()

	// The fake plugin is this test binary, found under its CNI type name.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(binDir, fakeCNIType)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n1 := startNode(t, ctx, r, c, binDir, workload, "node1", "10.0.0.1", "10.88.1.0/24", "")
	n2 := startNode(t, ctx, r, c, binDir, workload, "node2", "10.0.0.2", "10.88.2.0/24", "windows")
	t.Logf("TIMING two kubelets started (nodes registered) in %s", time.Since(start).Round(time.Millisecond))

	t.Run("NodeRegistered", func(t *testing.T) {
		for _, n := range []*testNode{n1, n2} {
			waitNodeReady(t, ctx, c, n.name, corev1.ConditionTrue, "")
			node, err := c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantOS := map[string]string{"node1": "linux", "node2": "windows"}[n.name]
			if node.Labels[corev1.LabelOSStable] != wantOS || node.Labels[corev1.LabelArchStable] == "" ||
				node.Labels[corev1.LabelHostname] != n.name {
				t.Errorf("%s labels: %v", n.name, node.Labels)
			}
			if len(node.Status.Addresses) != 2 || node.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.ip}) {
				t.Errorf("%s addresses: %v", n.name, node.Status.Addresses)
			}
			if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != 110 {
				t.Errorf("%s allocatable pods: %s", n.name, q.String())
			}
			lease, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
			if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != n.name || len(lease.OwnerReferences) != 1 {
				t.Errorf("%s lease: %+v %v", n.name, lease, err)
			}
			// GC ran before anything else, with no valid attachment: a fresh kubelet runs nothing.
			if calls := n.calls(t); len(calls) == 0 || calls[0].Cmd != "GC" || len(calls[0].Valid) != 0 {
				t.Errorf("%s: first CNI calls %+v, want a GC with no valid attachment", n.name, calls)
			}
		}
	})

	t.Run("PodLifecycle", func(t *testing.T) {
		pod, took := createReady(t, ctx, c, testPod("web", "node1",
			tcpPort(8080),
			corev1.ContainerPort{ContainerPort: 8081, Protocol: corev1.ProtocolUDP},
			corev1.ContainerPort{ContainerPort: 8082, Protocol: corev1.ProtocolSCTP}))
		t.Logf("TIMING pod create -> Ready: %s", took.Round(time.Millisecond))
		if pod.Spec.NodeName != "node1" || pod.Status.Phase != corev1.PodRunning || pod.Status.HostIP != n1.ip ||
			!strings.HasPrefix(pod.Status.PodIP, "10.88.1.") || len(pod.Status.PodIPs) != 1 ||
			len(pod.Status.ContainerStatuses) != 1 || !pod.Status.ContainerStatuses[0].Ready {
			t.Fatalf("pod status: node %q %+v", pod.Spec.NodeName, pod.Status)
		}
		// The kubelet's own status patch comes back as a pod update; the status it computes
		// then must equal what it wrote, or it would patch forever.
		time.Sleep(time.Second)
		if again, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); err != nil || again.ResourceVersion != pod.ResourceVersion {
			t.Errorf("pod web keeps changing after Ready (resourceVersion %s -> %s, %v)", pod.ResourceVersion, again.ResourceVersion, err)
		}
		netns, ok := n1.kl.PodNetns("default", "web")
		if !ok || !netnsExists(netns) {
			t.Fatalf("pod netns %q (%v) does not exist", netns, ok)
		}
		adds := n1.podCalls(t, "web")
		if len(adds) != 1 || adds[0].Cmd != "ADD" || adds[0].Netns != "/run/netns/"+netns || adds[0].IfName != "eth0" ||
			!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(adds[0].ContainerID) {
			t.Fatalf("CNI calls for web: %+v", adds)
		}
		cid := adds[0].ContainerID
		wantArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=" + cid + ";K8S_POD_UID=" + string(pod.UID)
		if adds[0].Args != wantArgs {
			t.Errorf("CNI_ARGS %q, want %q", adds[0].Args, wantArgs)
		}
		if err := n1.kl.CheckPod(ctx, "default", "web"); err != nil {
			t.Errorf("CHECK: %v", err)
		}

		// The workload answers from the node: name and the node's IP as the client.
		podIP := pod.Status.PodIP
		wantAnswer(t, "TCP", inNetns(t, ctx, n1.netns, func(ctx context.Context) (string, error) {
			return probe.TCP(ctx, podIP+":8080")
		}), "default/web", n1.ip)
		wantAnswer(t, "UDP", inNetns(t, ctx, n1.netns, func(ctx context.Context) (string, error) {
			return probe.UDP(ctx, podIP+":8081")
		}), "default/web", n1.ip)
		wantAnswer(t, "SCTP", inNetns(t, ctx, n1.netns, func(ctx context.Context) (string, error) {
			return probe.SCTPInit(ctx, netip.MustParseAddr(podIP), 8082)
		}), "default/web", n1.ip)

		// The real controller-manager publishes the ready pod in the Service's EndpointSlice.
		svcStart := time.Now()
		if _, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctx, "ready endpoint "+podIP, waitTimeout, waitInterval, func() (bool, error) {
			slices, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
			if err != nil {
				return false, err
			}
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if len(e.Addresses) == 1 && e.Addresses[0] == podIP && ptr.Deref(e.Conditions.Ready, false) && ptr.Deref(e.NodeName, "") == "node1" {
						return true, nil
					}
				}
			}
			return false, nil
		})
		t.Logf("TIMING Service create -> ready endpoint: %s", time.Since(svcStart).Round(time.Millisecond))

		// A graceful deletion: workload stopped, DEL with the ADD's container ID, namespace
		// gone, and the kubelet deletes the object for good.
		delStart := time.Now()
		if err := c.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodGone(t, ctx, c, "web")
		t.Logf("TIMING pod delete -> gone: %s", time.Since(delStart).Round(time.Millisecond))
		if !callWith(n1.podCalls(t, "web"), "DEL", cid) {
			t.Errorf("no DEL for %s: %+v", cid, n1.podCalls(t, "web"))
		}
		if netnsExists(netns) {
			t.Errorf("pod netns %s still exists", netns)
		}
		if _, ok := n1.kl.PodNetns("default", "web"); ok {
			t.Error("kubelet still runs web")
		}
	})

	t.Run("AddFailure", func(t *testing.T) {
		n1.setFailure(t, "fail-add", "injected ADD failure")
		if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("broken", "node1", tcpPort(8080)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := waitEvent(t, ctx, c, "broken", "FailedCreatePodSandBox", "injected ADD failure")
		t.Logf("event: %s %s: %s", ev.Type, ev.Reason, ev.Message)
		if ev.Type != corev1.EventTypeWarning || ev.Source.Component != "kubelet" || ev.Source.Host != "node1" {
			t.Errorf("event %+v", ev)
		}
		// containerd calls DEL after a failed ADD, and the namespace goes.
		calls := n1.podCalls(t, "broken")
		if len(calls) < 2 || calls[0].Cmd != "ADD" || !callWith(calls, "DEL", calls[0].ContainerID) {
			t.Errorf("calls after a failed ADD: %+v", calls)
		} else if ns := filepath.Base(calls[0].Netns); netnsExists(ns) {
			t.Errorf("netns %s of the failed sandbox still exists", ns)
		}
		// The kubelet retries with back-off; once ADD works the pod runs.
		n1.setFailure(t, "fail-add", "")
		fixed := time.Now()
		poll.Eventually(t, ctx, "broken Ready after the failure is gone", waitTimeout, waitInterval, func() (bool, error) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "broken", metav1.GetOptions{})
			return err == nil && podReady(p), err
		})
		t.Logf("TIMING ADD fixed -> pod Ready (retry back-off): %s", time.Since(fixed).Round(time.Millisecond))
		deleteAndWait(t, ctx, c, "broken")
	})

	t.Run("StatusFailure", func(t *testing.T) {
		n2.setFailure(t, "fail-status", "injected STATUS failure")
		failed := time.Now()
		waitNodeReady(t, ctx, c, "node2", corev1.ConditionFalse, "injected STATUS failure")
		t.Logf("TIMING STATUS fails -> node NotReady: %s; condition: %q", time.Since(failed).Round(time.Millisecond),
			nodeReadyCondition(t, ctx, c, "node2").Message)
		// No pod network is set up while the network is not ready.
		if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("waiting", "node2", tcpPort(8080)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ctx, c, "waiting", "NetworkNotReady", "injected STATUS failure")
		if calls := n2.podCalls(t, "waiting"); len(calls) != 0 {
			t.Errorf("CNI calls while the network is not ready: %+v", calls)
		}
		n2.setFailure(t, "fail-status", "")
		waitNodeReady(t, ctx, c, "node2", corev1.ConditionTrue, "")
		poll.Eventually(t, ctx, "waiting Ready", waitTimeout, waitInterval, func() (bool, error) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "waiting", metav1.GetOptions{})
			return err == nil && podReady(p), err
		})
		p, _ := c.CoreV1().Pods("default").Get(ctx, "waiting", metav1.GetOptions{})
		wantAnswer(t, "TCP on node2", inNetns(t, ctx, n2.netns, func(ctx context.Context) (string, error) {
			return probe.TCP(ctx, p.Status.PodIP+":8080")
		}), "default/waiting", n2.ip)

		// A missing configuration is a network that is not ready either.
		conf := filepath.Join(n2.confDir, "10-ovnt-test.conflist")
		data, _ := os.ReadFile(conf)
		os.Remove(conf)
		waitNodeReady(t, ctx, c, "node2", corev1.ConditionFalse, "cni plugin not initialized")
		os.WriteFile(conf, data, 0o644)
		waitNodeReady(t, ctx, c, "node2", corev1.ConditionTrue, "")
		deleteAndWait(t, ctx, c, "waiting")
	})

	t.Run("HostNetwork", func(t *testing.T) {
		pod := testPod("hostnet", "node1", tcpPort(9090))
		pod.Spec.HostNetwork = true
		pod, _ = createReady(t, ctx, c, pod)
		if pod.Status.PodIP != n1.ip {
			t.Errorf("hostNetwork pod IP %s, want the node's %s", pod.Status.PodIP, n1.ip)
		}
		if ns, _ := n1.kl.PodNetns("default", "hostnet"); ns != n1.netns {
			t.Errorf("hostNetwork pod runs in %q, want the node's %q", ns, n1.netns)
		}
		if calls := n1.podCalls(t, "hostnet"); len(calls) != 0 {
			t.Errorf("CNI calls for a hostNetwork pod: %+v", calls)
		}
		wantAnswer(t, "TCP to hostNetwork pod", inNetns(t, ctx, n1.netns, func(ctx context.Context) (string, error) {
			return probe.TCP(ctx, n1.ip+":9090")
		}), "default/hostnet", n1.ip)
		deleteAndWait(t, ctx, c, "hostnet")
	})

	t.Run("ForceDeleteAndCheck", func(t *testing.T) {
		createReady(t, ctx, c, testPod("force", "node1", tcpPort(8080)))
		netns, _ := n1.kl.PodNetns("default", "force")
		cid := n1.podCalls(t, "force")[0].ContainerID
		// CHECK sees a pod whose address was taken away.
		if _, err := harness.Exec(ctx, netns, "ip", "addr", "flush", "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
		if err := n1.kl.CheckPod(ctx, "default", "force"); err == nil {
			t.Error("CHECK passed on a pod without its address")
		}
		// Force deletion removes the object at once; the kubelet still cleans up.
		if err := c.CoreV1().Pods("default").Delete(ctx, "force", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctx, "DEL and netns removal of force", waitTimeout, waitInterval, func() (bool, error) {
			return callWith(n1.podCalls(t, "force"), "DEL", cid) && !netnsExists(netns), nil
		})
	})

	t.Run("WorkloadRestart", func(t *testing.T) {
		pod, _ := createReady(t, ctx, c, testPod("crashy", "node1", tcpPort(8080)))
		netns, _ := n1.kl.PodNetns("default", "crashy")
		if _, err := harness.Exec(ctx, "", "sh", "-c", "ip netns pids "+netns+" | xargs -r kill -9"); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, ctx, "crashy restarted", waitTimeout, waitInterval, func() (bool, error) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "crashy", metav1.GetOptions{})
			return err == nil && podReady(p) && p.Status.ContainerStatuses[0].RestartCount == 1, err
		})
		wantAnswer(t, "TCP after restart", inNetns(t, ctx, n1.netns, func(ctx context.Context) (string, error) {
			return probe.TCP(ctx, pod.Status.PodIP+":8080")
		}), "default/crashy", n1.ip)
		deleteAndWait(t, ctx, c, "crashy")
	})

	t.Run("KubeletRestart", func(t *testing.T) {
		// Stop is a graceful node shutdown: the pod's network is deleted (DEL), its object
		// stays bound to the node. A new kubelet runs GC first, then gives the pod a new
		// sandbox and reports its new IP.
		old, _ := createReady(t, ctx, c, testPod("survivor", "node2", tcpPort(8080)))
		oldNetns, _ := n2.kl.PodNetns("default", "survivor")
		oldCID := n2.podCalls(t, "survivor")[0].ContainerID
		before := len(n2.calls(t))
		start := time.Now()
		n2.restart(t, ctx)
		if !callWith(n2.podCalls(t, "survivor"), "DEL", oldCID) || netnsExists(oldNetns) {
			t.Errorf("Stop left the sandbox: calls %+v, netns %s exists: %v", n2.podCalls(t, "survivor"), oldNetns, netnsExists(oldNetns))
		}
		if calls := n2.calls(t); len(calls) <= before || !callWith(calls[before:], "GC", "") {
			t.Errorf("no GC from the new kubelet: %+v", calls[before:])
		}
		var pod *corev1.Pod
		poll.Eventually(t, ctx, "survivor with a new sandbox", waitTimeout, waitInterval, func() (bool, error) {
			var err error
			pod, err = c.CoreV1().Pods("default").Get(ctx, "survivor", metav1.GetOptions{})
			return err == nil && podReady(pod) && pod.Status.PodIP != old.Status.PodIP, err
		})
		t.Logf("TIMING kubelet restart -> pod Ready again: %s (IP %s -> %s)", time.Since(start).Round(time.Millisecond),
			old.Status.PodIP, pod.Status.PodIP)
		wantAnswer(t, "TCP after kubelet restart", inNetns(t, ctx, n2.netns, func(ctx context.Context) (string, error) {
			return probe.TCP(ctx, pod.Status.PodIP+":8080")
		}), "default/survivor", n2.ip)
	})

	t.Run("NodeDeletedStaysDeleted", func(t *testing.T) {
		// Like kubelet, the stand-in registers only when it starts: a deleted Node stays
		// deleted, so tests can take a node out of the cluster.
		if err := c.CoreV1().Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * n1.cfg.StatusInterval)
		if _, err := c.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node1 after its deletion: %v, want NotFound", err)
		}
	})

	// Nothing of the pods remains after Stop, nor of the run after Close.
	n1.kl.Stop()
	n2.kl.Stop()
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), r.Name("p")) {
		t.Errorf("pod namespaces left after Stop:\n%s", out)
	}
	id := r.ID
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), harness.Prefix+id+"-") {
		t.Errorf("namespaces of the run left after Close:\n%s", out)
	}
	if out, _ := exec.Command("pgrep", "-f", workload).Output(); len(out) > 0 {
		t.Errorf("workload processes left after Close: %s", out)
	}
}
