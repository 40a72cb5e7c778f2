package controller

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// chassisAnnotation is the chassis annotation of test node i with address nodeIP.
func chassisAnnotation(t *testing.T, i int, nodeIP string) map[string]string {
	t.Helper()
	v, err := (contract.NodeChassisInfo{ChassisID: fmt.Sprintf("chassis-%d", i), NodeIP: nodeIP,
		GatewayMAC: fmt.Sprintf("0a:58:ac:12:00:%02x", i), NextHop: "172.18.0.254"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{contract.NodeChassisKey: v}
}

// nodeIPRows are the rows a node's address reaches: its management port (port_security),
// the cluster router's reroute towards that port, its gateway router's external port and
// its template variables, without their UUIDs, in a stable order.
func (e *unitEnv) nodeIPRows(node string) []string {
	var out []any
	for _, r := range unitRows[*nbdb.LogicalSwitchPort](e) {
		if r.Name == contract.ManagementPort(node) {
			r.UUID = ""
			out = append(out, *r)
		}
	}
	for _, r := range unitRows[*nbdb.LogicalRouterPolicy](e) {
		if strings.HasPrefix(r.Match, "ip4.dst == ") {
			r.UUID = ""
			out = append(out, *r)
		}
	}
	for _, r := range unitRows[*nbdb.LogicalRouterPort](e) {
		if r.Name == contract.GatewayExternalPort(node) {
			r.UUID = ""
			out = append(out, *r)
		}
	}
	for _, r := range unitRows[*nbdb.ChassisTemplateVar](e) {
		r.UUID = ""
		out = append(out, *r)
	}
	rows := make([]string, len(out))
	for i, r := range out {
		rows[i] = fmt.Sprintf("%T %+v", r, r)
	}
	slices.Sort(rows)
	return rows
}

// Security audit 2, finding 1: a node whose agent publishes a pod's address (or a
// ClusterIP, a gateway router's join address, another node's address, one its kubelet does
// not report) as its own gets an InvalidNodeChassis Event naming it, and every row its
// address reaches stays as it was: no port_security or reroute widened.
func TestUnitNodeIPImpersonationRefused(t *testing.T) {
	cfg := testConfig("10.244.0.0/16")
	cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	node2 := kubetest.Node("node2", chassisAnnotation(t, 2, "172.18.0.2/24"))
	node2.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}}
	e := startUnit(t, cfg, kubetest.Node("node1", chassisAnnotation(t, 1, "172.18.0.1/24")), node2)
	sub1, sub2 := e.waitNodeSubnet("node1"), e.waitNodeSubnet("node2")
	mgmt1 := contract.ManagementIP(sub1)
	waitRow(e, "node1's reroute", func(r *nbdb.LogicalRouterPolicy) bool { return strings.HasPrefix(r.Match, "ip4.dst == 172.18.0.1 ") })
	waitRow(e, "node2's reroute", func(r *nbdb.LogicalRouterPolicy) bool { return strings.HasPrefix(r.Match, "ip4.dst == 172.18.0.2 ") })
	ps := waitRow(e, "node1's management port", lspNamed(contract.ManagementPort("node1")))
	if want := []string{fmt.Sprintf("%s %s 172.18.0.1", contract.MACFromIP(mgmt1), mgmt1)}; !reflect.DeepEqual(ps.PortSecurity, want) {
		t.Fatalf("node1's management port_security %q, want %q", ps.PortSecurity, want)
	}
	before := e.nodeIPRows("node1")

	podOnNode2 := contract.ManagementIP(sub2).Next().Next() // .4 of node2's subnet
	for _, forged := range []string{netip.PrefixFrom(podOnNode2, 24).String(), "10.96.0.10/16", "100.64.0.3/16", "172.18.0.2/24", "127.0.0.1/8"} {
		n := e.node("node1")
		n.Annotations = chassisAnnotation(t, 1, forged)
		if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "Event on node1 naming "+forged, func() (bool, string) {
			evs := e.events.Events("node1")
			for _, ev := range evs {
				if ev.Reason == ReasonInvalidChassis && strings.Contains(ev.Message, "nodeIP "+forged) &&
					strings.Contains(ev.Message, "keeps node address 172.18.0.1/24") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", evs)
		})
		if after := e.nodeIPRows("node1"); !reflect.DeepEqual(after, before) {
			t.Errorf("node1 published %s: rows\n%s\nwere\n%s", forged, strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
	}

	// Its kubelet's word and its agent's disagree: refused too. Then a new address of its
	// own is taken.
	n := e.node("node1")
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.9"}}
	n.Annotations = chassisAnnotation(t, 1, "172.18.0.8/24")
	if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.events.WaitEvent(t, "node1", ReasonInvalidChassis)
	kubetest.Eventually(t, "Event: not the kubelet's", func() (bool, string) {
		for _, ev := range e.events.Events("node1") {
			if strings.Contains(ev.Message, "not one of the node's InternalIPs [172.18.0.9]") {
				return true, ""
			}
		}
		return false, ""
	})
	n = e.node("node1")
	n.Annotations = chassisAnnotation(t, 1, "172.18.0.9/24")
	if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRow(e, "node1's reroute to its new address", func(r *nbdb.LogicalRouterPolicy) bool { return strings.HasPrefix(r.Match, "ip4.dst == 172.18.0.9 ") })
	waitRow(e, "node1's management port with its new address", func(r *nbdb.LogicalSwitchPort) bool {
		return r.Name == contract.ManagementPort("node1") && reflect.DeepEqual(r.PortSecurity, []string{fmt.Sprintf("%s %s 172.18.0.9", contract.MACFromIP(mgmt1), mgmt1)})
	})
}
