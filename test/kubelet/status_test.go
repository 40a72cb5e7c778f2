//go:build linux

package kubelet

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRunningStatus(t *testing.T) {
	scheduled := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "i"}},
			Containers:     []corev1.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "y"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse},
			},
		},
	}
	sb := &sandbox{containerID: strings.Repeat("ab", 32), ips: []string{"10.88.1.2", "fd00::2"},
		created: time.Now(), started: time.Now(), restarts: 2}
	now := metav1.Now()
	st := runningStatus(pod, "10.0.0.1", sb, now)

	if st.Phase != corev1.PodRunning || st.PodIP != "10.88.1.2" || len(st.PodIPs) != 2 || st.PodIPs[1].IP != "fd00::2" ||
		st.HostIP != "10.0.0.1" || st.StartTime == nil {
		t.Errorf("status %+v", st)
	}
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodScheduled: corev1.ConditionTrue, corev1.PodReadyToStartContainers: corev1.ConditionTrue,
		corev1.PodInitialized: corev1.ConditionTrue, corev1.ContainersReady: corev1.ConditionTrue,
		corev1.PodReady: corev1.ConditionTrue, corev1.DisruptionTarget: corev1.ConditionFalse, // not ours: kept
	}
	if len(st.Conditions) != len(want) {
		t.Errorf("conditions %+v", st.Conditions)
	}
	for _, c := range st.Conditions {
		if want[c.Type] != c.Status {
			t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want[c.Type])
		}
		if c.Type == corev1.PodScheduled && !c.LastTransitionTime.Equal(&scheduled) {
			t.Errorf("PodScheduled transition time changed to %s", c.LastTransitionTime)
		}
	}
	if len(st.ContainerStatuses) != 2 || !st.ContainerStatuses[1].Ready || st.ContainerStatuses[1].RestartCount != 2 ||
		st.ContainerStatuses[1].State.Running == nil || st.ContainerStatuses[0].ContainerID == st.ContainerStatuses[1].ContainerID {
		t.Errorf("container statuses %+v", st.ContainerStatuses)
	}
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil {
		t.Errorf("init container statuses %+v", st.InitContainerStatuses)
	}

	// Level-triggered: once reported, the same sandbox yields the same status, so the kubelet
	// does not patch on every sync.
	pod.Status = st
	if again := runningStatus(pod, "10.0.0.1", sb, metav1.NewTime(now.Add(time.Minute))); !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("second call changed the status:\n%+v\n%+v", again, st)
	}
}

func TestNodeStatus(t *testing.T) {
	cfg := Config{NodeName: "n1", NodeIP: "10.0.0.1", OS: "linux", Arch: "amd64"}
	t0 := metav1.NewTime(time.Now().Add(-time.Hour))
	var st corev1.NodeStatus
	st.Conditions = []corev1.NodeCondition{{Type: "NetworkUnavailable", Status: corev1.ConditionFalse}} // not ours: kept
	setNodeStatus(&st, cfg, nil, t0)
	if !nodeReady(&st) || len(st.Conditions) != 5 || st.Addresses[0].Address != "10.0.0.1" {
		t.Fatalf("ready status %+v", st)
	}
	before := st.DeepCopy()
	setNodeStatus(&st, cfg, nil, metav1.Now())
	if statusChanged(before, &st) {
		t.Error("a heartbeat alone counts as a change")
	}
	setNodeStatus(&st, cfg, errors.New("plugin down"), metav1.Now())
	if nodeReady(&st) || !statusChanged(before, &st) {
		t.Errorf("not-ready status %+v", st)
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady && (c.LastTransitionTime.Equal(&t0) || !strings.Contains(c.Message, "NetworkReady=false") ||
			!strings.Contains(c.Message, "plugin down")) {
			t.Errorf("Ready condition %+v", c)
		}
		if c.Type == corev1.NodeMemoryPressure && !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("MemoryPressure transition time moved: %+v", c)
		}
	}
}

func TestPodIPs(t *testing.T) {
	ipnet := func(s string) net.IPNet {
		ip, n, _ := net.ParseCIDR(s)
		n.IP = ip
		return *n
	}
	res := &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{{Name: "veth1"}, {Name: "eth0", Sandbox: "/run/netns/x"}},
		IPs: []*current.IPConfig{
			{Interface: current.Int(0), Address: ipnet("169.254.1.1/32")}, // host side: not the pod's
			{Interface: current.Int(1), Address: ipnet("fd00::5/64")},
			{Interface: current.Int(1), Address: ipnet("10.88.1.5/24")},
		},
	}
	ips, err := podIPs(res, "eth0")
	if err != nil || len(ips) != 2 || ips[0] != "10.88.1.5" || ips[1] != "fd00::5" {
		t.Errorf("podIPs = %v, %v", ips, err)
	}
	res.IPs = res.IPs[:1]
	if _, err := podIPs(res, "eth0"); err == nil {
		t.Error("a result without a pod IP was accepted")
	}
}
