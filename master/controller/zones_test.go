//go:build linux

package controller

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// TestServiceTopologyHints: a Service whose endpoints carry zone hints gets its ClusterIP on
// each node switch with the endpoints of that node's zone. ovn-trace, with no backend
// chosen for it, delivers pod a's packet to the VIP to its own zone's pod; a node that moves
// zone and a node without a zone label get theirs; node hints (PreferSameNode) win over
// zone hints.
func TestServiceTopologyHints(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	pa, pb := e.twoNodePods("zone-a", "zone-b")
	ipA, ipB := pa.IPs[0].Addr().String(), pb.IPs[0].Addr().String()

	svc := e.createService("zoned", corev1.ServiceTypeClusterIP, []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}})
	vip := svc.Spec.ClusterIP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "zoned-x", Labels: map[string]string{discoveryv1.LabelServiceName: "zoned"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{ipA}, NodeName: ptr.To("node1"), Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}},
			{Addresses: []string{ipB}, NodeName: ptr.To("node2"), Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-b"}}}},
		},
	}
	if _, err := e.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	switchVIP := func(node, want string) {
		t.Helper()
		e.eventually(node+"'s switch LB sends the ClusterIP to "+want, func() (bool, string) {
			out := e.lbGet("Service_default/zoned_TCP_node_switch_" + node)
			return strings.Contains(out, fmt.Sprintf(`"%s:80"="%s"`, vip, want)), out
		})
	}
	switchVIP("node1", ipA+":8080")
	switchVIP("node2", ipB+":8080")
	lb := e.lbGet("Service_default/zoned_TCP_node_switch_node1")
	for _, want := range []string{`"k8s.ovn-transparent.io/owner"="default/zoned"`, `"k8s.ovn-transparent.io/owner-kind"=Service`,
		`"k8s.ovn-transparent.io/role"=lb-node-switch`, `"k8s.ovn-transparent.io/scope"="tcp/node1"`} {
		if !strings.Contains(lb, want) {
			t.Errorf("node1's switch LB lacks %s:\n%s", want, lb)
		}
	}
	// Not in the cluster load balancer too: two VIPs on one switch are undefined.
	if out := e.lbGet("Service_default/zoned_TCP_cluster"); strings.Contains(out, vip) {
		t.Errorf("the cluster LB still has the ClusterIP:\n%s", out)
	}
	// The semantic oracle: pod a's packet to the VIP, backend left to the load balancer.
	gwMAC := contract.MACFromIP(pa.Gateways[0])
	flow := fmt.Sprintf(`inport == "default_a" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == 80`,
		pa.MAC, gwMAC, ipA, vip)
	e.nbctl("--wait=sb", "sync")
	out, err := exec.CommandContext(ctx, "ovn-trace", "--db="+e.central.SBRemote, "--ct=new", "--ct=new", "--ct=new", "--ct=new", "node1", flow).CombinedOutput()
	if err != nil {
		t.Fatalf("ovn-trace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ct_lb_mark(backends="+ipA+":8080);") {
		t.Errorf("pod a (zone-a) to the VIP: not balanced to its zone's endpoint %s only:\n%s", ipA, out)
	}

	// node2 moves to zone-a: its pods use a's endpoint too.
	e.setZone("node2", "zone-a")
	switchVIP("node2", ipA+":8080")
	// node3 has no zone label: every endpoint.
	e.createNode("node3", chassisOf(3))
	switchVIP("node3", sortedJoin(ipA+":8080", ipB+":8080"))

	// PreferSameNode: node hints win over zone hints (node1 and node2 now share zone-a);
	// node3, for which no endpoint is hinted, falls back to the zone hints, and having no
	// zone, to every endpoint.
	cur, err := e.kube.DiscoveryV1().EndpointSlices("default").Get(ctx, "zoned-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"node1", "node2"} {
		cur.Endpoints[i].Hints.ForNodes = []discoveryv1.ForNode{{Name: node}}
	}
	if _, err := e.kube.DiscoveryV1().EndpointSlices("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	switchVIP("node2", ipB+":8080")
	switchVIP("node1", ipA+":8080")
	switchVIP("node3", sortedJoin(ipA+":8080", ipB+":8080"))
	e.checkEveryRowOwned()
}

// setZone labels node with zone.
func (e *env) setZone(node, zone string) {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[corev1.LabelTopologyZone] = zone
	if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
