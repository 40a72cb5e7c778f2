//go:build linux

package controller

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// reasonInvalidChassis is ReasonInvalidChassis, spelt out.
const reasonInvalidChassis = "InvalidNodeChassis"

// nodeIPRows are what node's published address reaches: its management port's
// port_security, the cluster router's reroute towards that port, and its gateway router's
// external port.
func (e *env) nodeIPRows(node string) string {
	e.t.Helper()
	return fmt.Sprintf("port_security=%s reroute=%s rtoe=%s",
		e.nbctl("get", "logical_switch_port", contract.ManagementPort(node), "port_security"),
		e.nbctl("--format=csv", "--data=bare", "--no-headings", "--columns=match", "find", "logical_router_policy", "nexthops="+contract.ManagementIP(e.nodeSubnet(node)).String()),
		e.nbctl("get", "logical_router_port", contract.GatewayExternalPort(node), "networks"))
}

// Security audit 2, finding 1: a node that publishes a pod's address (or a Service's, a
// gateway router's, another node's) as its own gets an Event, and its management port,
// reroute and gateway router keep the address they had.
func TestNodeIPImpersonationRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	e.startMaster(cfg)
	e.createNode("node1", chassisOf(1))
	e.createNode("node2", chassisOf(2))
	e.waitGRChassis("node1", "chassis-1")
	e.waitGRChassis("node2", "chassis-2")
	sub1 := e.nodeSubnet("node1")
	want := fmt.Sprintf(`port_security=["%s %s 172.18.0.1"] reroute=ip4.dst == 172.18.0.1 && (ip4.src == %s || tcp.dst >= 64512 || udp.dst >= 64512) rtoe=["172.18.0.1/24"]`,
		contract.MACFromIP(contract.ManagementIP(sub1)), contract.ManagementIP(sub1), sub1)
	e.eventually("node1's rows with its own address", func() (bool, string) {
		got := e.nodeIPRows("node1")
		return got == want, got
	})

	podOnNode2 := netip.PrefixFrom(contract.ManagementIP(e.nodeSubnet("node2")).Next().Next(), 24)
	for _, forged := range []string{podOnNode2.String(), "10.96.0.10/16", "100.64.0.3/16", "172.18.0.2/24"} {
		info := *chassisOf(1)
		info.NodeIP = forged
		e.setChassis("node1", &info)
		e.waitEventSaying("node1", reasonInvalidChassis, "nodeIP "+forged)
		if got := e.nodeIPRows("node1"); got != want {
			t.Errorf("node1 published %s:\n got %s\nwant %s", forged, got, want)
		}
	}
}

// waitEventSaying waits for a Warning Event with reason on the object named name whose
// message contains text.
func (e *env) waitEventSaying(name, reason, text string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("event %s on %s saying %q", reason, name, text), func() (bool, string) {
		l, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, ev := range l.Items {
			if strings.Contains(ev.Message, text) {
				return true, ""
			}
			msgs = append(msgs, ev.Message)
		}
		return false, fmt.Sprint(msgs)
	})
}
