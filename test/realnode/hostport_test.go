//go:build linux

package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestHostPort: a pod's hostPort (containerd passes it through the portMappings
// capability) opens on its node's IP, from the external host, from a pod on another node and
// from the node itself; it closes when the pod is gone.
func TestHostPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "hostport")
	n1, n2 := cl.Nodes[0], cl.Nodes[1]
	const hostPort = 8090
	web := netexec(ns, "web", n2.Name, 8080, false)
	web.Spec.Containers[0].Ports[0].HostPort = hostPort
	create(ctx, t, web)
	create(ctx, t, clientPod(ns, n1.Name))
	waitReady(ctx, t, ns, "web")
	waitReady(ctx, t, ns, "client")
	url := fmt.Sprintf("http://%s:%d/hostname", n2.IP, hostPort)
	get := map[string]func() (string, error){
		"the external host": func() (string, error) {
			return harness.Exec(ctx, cl.External.Netns, "busybox", "timeout", "5", "busybox", "wget", "-q", "-O", "-", url)
		},
		"a pod on another node": func() (string, error) {
			return podExec(ctx, ns, "client", "curl", "-s", "-m", "5", url)
		},
		"the node itself": func() (string, error) {
			return harness.Exec(ctx, n2.Netns, "busybox", "timeout", "5", "busybox", "wget", "-q", "-O", "-", url)
		},
	}
	for from, fetch := range get {
		if out, err := fetch(); err != nil || strings.TrimSpace(out) != "web" {
			t.Errorf("hostPort %d on %s from %s: %q (%v), want the pod's name", hostPort, n2.Name, from, out, err)
		}
	}
	if err := cl.Kube.Client().CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctx, "the host port closed after the pod is gone", time.Minute, 500*time.Millisecond, func() (bool, error) {
		out, err := get["the external host"]()
		return err != nil, fmt.Errorf("still answered %q", out)
	})
}
