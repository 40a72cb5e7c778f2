//go:build linux

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// TestServiceExternalIPNodeAddress (security audit H1): a tenant's Service that claims node1's
// own address as an externalIP, on the port a hostNetwork listener of node1 serves (as sshd
// or the kubelet would), does not take that port over: the external host and pods still
// reach node1's listener. The Service's allowed externalIP still works, and an Event on the
// Service names the refused address. The test cluster allows the whole underlay, so the
// refusal is the node-address rule's.
func TestServiceExternalIPNodeAddress(t *testing.T) {
	ns := testNamespace(t)
	const port, eip = 18380, "192.0.2.13"
	host := podSpec(ns, "host", "node1")
	host.Spec.HostNetwork = true
	host.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	_ = startPod(t, host)
	backend := startPod(t, workloadPod(ns, "a", "node2", "web", corev1.ContainerPort{Name: "tcp", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}))
	cli := startPod(t, workloadPod(ns, "client", "node2", "client"))
	node1 := cl.Node("node1").IP

	s := newService(ns, "hijack", "web", svcPort("http", corev1.ProtocolTCP, port, 8080))
	s.Spec.ExternalIPs = []string{node1, eip}
	createService(t, s)
	// The allowed address works: the master and both nodes have the Service.
	for _, via := range nodeIPs() {
		t.Run("allowed externalIP via "+via, func(t *testing.T) {
			externalRoute(t, eip, via)
			expectSpread(t, cl.External.Netns, "tcp", addrPort(eip, port), ns+"/"+backend.Name)
		})
	}
	t.Run("node1's port stays node1's", func(t *testing.T) {
		for from, netns := range map[string]string{"external host": cl.External.Netns, "pod": podNetns(t, cli)} {
			waitAnswer(t, netns, "tcp", addrPort(node1, port), ns+"/host")
			if seen := collect(t, netns, "tcp", addrPort(node1, port), 10); seen[ns+"/host"] != 10 {
				t.Errorf("from the %s, %s:%d answered by %v; want node1's own listener every time", from, node1, port, seen)
			}
		}
	})
	t.Run("an Event names the Service", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		err := poll.Until(ctx, "Event "+svcmodel.ReasonExternalIPRefused+" on Service hijack", 200*time.Millisecond, func() (bool, error) {
			l, err := client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=hijack,reason=" + svcmodel.ReasonExternalIPRefused})
			return err == nil && len(l.Items) > 0, err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
