//go:build linux

package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// TestMasterBadInput: (f) input the master cannot use becomes an Event on the object, and the
// master keeps serving everything else: a cluster CIDR with room for two nodes only, a
// malformed chassis annotation, pods with a malformed or copied pod-network annotation (the
// master overwrites both with its own allocation), a pod bound to a node that does not exist.
func TestMasterBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.128.0.0/23"))

	e.createNode("node-a", chassisOf(1))
	subA := e.nodeSubnet("node-a")
	// node-b's agent wrote garbage: the node gets its switch but no gateway router.
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b",
		Annotations: map[string]string{contract.NodeChassisKey: `{"chassisID": ""}`}}}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subB := e.nodeSubnet("node-b")
	e.waitEvent("node-b", ReasonInvalidChassis)
	e.waitPort("k8s-node-b", true)
	if routers := e.names("logical_router"); len(routers) != 2 {
		t.Errorf("routers %v, want the cluster router and GR_node-a only", routers)
	}

	e.createNode("node-c", chassisOf(3))
	e.waitEvent("node-c", ReasonSubnetExhausted)
	e.createPod("default", "on-c", "node-c", nil)
	e.waitEvent("on-c", ReasonNodeWithoutSubnet)

	e.createPod("default", "garbage", "node-a", map[string]string{contract.PodNetworkKey: `{"ipAddresses": ["oops"]}`})
	e.createPod("default", "lost", "nowhere", nil)
	e.createPod("default", "good", "node-a", nil)
	good := e.podNetwork("default", "good")
	// Someone copied good's annotation onto another pod: the address stays good's.
	v, err := (contract.PodNetworkInfo{IPAddresses: []string{good.IPs[0].String()}, MACAddress: good.MAC.String(),
		GatewayIPs: []string{good.Gateways[0].String()}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e.createPod("default", "copy", "node-a", map[string]string{contract.PodNetworkKey: v})
	e.waitEvent("garbage", ReasonInvalidPodNetwork)
	e.waitEvent("lost", ReasonUnknownNode)
	e.waitEvent("copy", ReasonPodNetworkOverwritten)
	for _, port := range []string{"default_good", "default_garbage", "default_copy"} {
		e.waitPort(port, true)
	}
	for _, port := range []string{"default_lost", "default_on-c"} {
		e.waitPort(port, false)
	}
	// Only the master chooses addresses: both annotations now say what it allocated.
	garbage, copied := e.podNetwork("default", "garbage"), e.podNetwork("default", "copy")
	for _, pn := range []contract.PodNetwork{garbage, copied} {
		if pn.IPs[0].Masked() != subA || pn.IPs[0] == good.IPs[0] || pn.MAC.String() != contract.MACFromIP(pn.IPs[0].Addr()).String() {
			t.Errorf("annotation %+v: not an address of its own in %s (good has %v)", pn, subA, good.IPs)
		}
	}

	// Still serving: another pod, and node-c gets node-b's subnet once node-b goes.
	e.createPod("default", "after", "node-a", nil)
	if after := e.podNetwork("default", "after"); after.IPs[0].Masked() != subA || after.IPs[0] == good.IPs[0] {
		t.Errorf("pod after: %v (good has %v)", after.IPs, good.IPs)
	}
	if err := e.kube.CoreV1().Nodes().Delete(ctx, "node-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.nodeSubnet("node-c"); got != subB {
		t.Errorf("node-c got %s, want node-b's freed %s", got, subB)
	}
	e.waitPort("default_on-c", true)
}
