//go:build linux

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// TestPodToExternal: pods leave the cluster through their node's gateway router, SNATed to
// their node's IP, and reach another node's own address the same way.
func TestPodToExternal(t *testing.T) {
	ns := testNamespace(t)
	srv := &probe.Server{Name: "external", TCP: []uint16{19000}, UDP: []uint16{19001}}
	if err := harness.InNetns(cl.External.Netns, srv.Start); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	a := startPod(t, podSpec(ns, "a", "node1"))
	c := startPod(t, podSpec(ns, "c", "node2"))
	for _, tc := range []struct {
		pod  *corev1.Pod
		node string
	}{{a, "node1"}, {c, "node2"}} {
		t.Run(tc.pod.Name+" to external host", func(t *testing.T) {
			nodeIP := netip.MustParseAddr(cl.Node(tc.node).IP)
			expectAnswerPorts(t, podNetns(t, tc.pod), cl.External.IP, 19000, 19001, "external", nodeIP)
		})
	}

	host := podSpec(ns, "host2", "node2")
	host.Spec.HostNetwork = true
	host.Spec.Containers[0].Ports = []corev1.ContainerPort{
		{ContainerPort: 18180, Protocol: corev1.ProtocolTCP},
		{ContainerPort: 19190, Protocol: corev1.ProtocolUDP},
	}
	_ = startPod(t, host)
	t.Run("pod to another node's IP", func(t *testing.T) {
		expectAnswerPorts(t, podNetns(t, a), cl.Node("node2").IP, 18180, 19190, ns+"/host2", netip.MustParseAddr(cl.Node("node1").IP))
	})
	t.Run("ping external host", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := poll.Until(ctx, "ping from a pod to the external host", 200*time.Millisecond, func() (bool, error) {
			_, err := harness.Exec(ctx, podNetns(t, a), "ping", "-c1", "-W1", cl.External.IP)
			return err == nil, err
		}); err != nil {
			t.Fatal(err)
		}
	})
}
