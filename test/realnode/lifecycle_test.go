//go:build linux

package realnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// TestContainerRestart: kubelet restarts a container whose liveness probe fails; the pod
// keeps its sandbox, its address and its connectivity across the restart.
func TestContainerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "restart")
	n1, n2 := cl.Nodes[0], cl.Nodes[1]
	web := netexec(ns, "web", n2.Name, 8080, false)
	// The container passes its liveness probe for its first few seconds only.
	web.Spec.Containers = append(web.Spec.Containers, corev1.Container{
		Name: "flaky", Image: images.Busybox,
		Command: []string{"sh", "-c", "touch /tmp/alive; sleep 4; rm /tmp/alive; sleep 3600"},
		LivenessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/alive"}}}},
	})
	create(ctx, t, web)
	create(ctx, t, clientPod(ns, n1.Name))
	before := waitReady(ctx, t, ns, "web")
	waitReady(ctx, t, ns, "client")
	var after *corev1.Pod
	poll.Eventually(t, ctx, "kubelet restarts the flaky container", 2*time.Minute, 500*time.Millisecond, func() (bool, error) {
		p, err := cl.Kube.Client().CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		after = p
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "flaky" && c.RestartCount > 0 {
				return true, nil
			}
		}
		return false, fmt.Errorf("container statuses %v", p.Status.ContainerStatuses)
	})
	if after.Status.PodIP != before.Status.PodIP {
		t.Errorf("the pod's address changed across a container restart: %s -> %s", before.Status.PodIP, after.Status.PodIP)
	}
	url := "http://" + before.Status.PodIP + ":8080/hostname"
	if out, err := podExec(ctx, ns, "client", "curl", "-s", "-m", "5", url); err != nil || strings.TrimSpace(out) != "web" {
		t.Errorf("client -> web after the restart: %q (%v)", out, err)
	}
}

// TestPortForward: kubectl port-forward reaches a pod (API server -> kubelet -> containerd,
// into the pod's network namespace).
func TestPortForward(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "portforward")
	create(ctx, t, netexec(ns, "web", cl.Nodes[1].Name, 8080, false))
	waitReady(ctx, t, ns, "web")
	cmd, err := kubectlCmd(ctx, "port-forward", "-n", ns, "pod/web", "--address", "127.0.0.1", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// "Forwarding from 127.0.0.1:40123 -> 8080"
	var local string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "Forwarding from %s ->", &local); err == nil {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if local == "" {
		t.Fatalf("kubectl port-forward printed no local address (%v)", sc.Err())
	}
	resp, err := http.Get("http://" + local + "/hostname")
	if err != nil {
		t.Fatalf("GET through port-forward %s: %v", local, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.TrimSpace(string(body)) != "web" {
		t.Errorf("GET through port-forward: %q, want the pod's name", body)
	}
}
