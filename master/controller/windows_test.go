//go:build linux

package controller

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// TestWindowsNodeSameAsLinux: a node registered as Windows (kubernetes.io/os=windows, the
// agent's chassis annotation saying windows) gets the same Northbound rows as a Linux node,
// and ovn-trace from a pod port on it shows a NetworkPolicy's allow and deny and a Service's
// load balancing exactly as on Linux: policy and Services live in OVN, not in the node's OS.
func TestWindowsNodeSameAsLinux(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	e.createNode("lin1", chassisOf(1))
	win := chassisOf(2)
	win.OS = "windows"
	e.createNode("win1", win)
	patch := `{"metadata":{"labels":{"kubernetes.io/os":"windows"}}}`
	if _, err := e.kube.CoreV1().Nodes().Patch(e.ctx, "win1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPort("k8s-win1", true)
	e.waitPort("k8s-lin1", true)
	// The gateway routers reference the cluster load balancer group once the group exists.
	for _, gr := range []string{"GR_lin1", "GR_win1"} {
		e.eventually(gr+" in the group", func() (bool, string) {
			got := e.nbctl("get", "logical_router", gr, "load_balancer_group")
			return got != "[]", got
		})
	}

	// The same rows, up to names and addresses.
	for _, table := range []string{"Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port",
		"Logical_Router_Static_Route", "NAT", "Chassis_Template_Var"} {
		lin, winRows := e.nodeRows(table, "lin1"), e.nodeRows(table, "win1")
		t.Logf("%s: %d rows per node", table, len(lin))
		if len(lin) == 0 {
			t.Errorf("%s: the Linux node owns no rows", table)
		}
		if !slices.Equal(lin, winRows) {
			t.Errorf("%s: the Windows node's rows differ from the Linux node's:\nlinux:\n%s\nwindows:\n%s",
				table, strings.Join(lin, "\n"), strings.Join(winRows, "\n"))
		}
	}

	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080}
	winSrv := e.createLabelledPod("default", "win-srv", "win1", map[string]string{"app": "srv"}, http)
	winCli := e.createLabelledPod("default", "win-cli", "win1", map[string]string{"app": "cli"})
	winOther := e.createLabelledPod("default", "win-other", "win1", map[string]string{"app": "other"})
	linSrv := e.createLabelledPod("default", "lin-srv", "lin1", map[string]string{"app": "srv"}, http)
	linCli := e.createLabelledPod("default", "lin-cli", "lin1", map[string]string{"app": "cli"})

	// traceFrom traces a new TCP connection from src (on its node's switch) to dst:port and
	// says whether it is delivered to want's port.
	traceFrom := func(src testPod, node string, dst string, port int, want testPod, lbDst string) (bool, string) {
		flow := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == %d`,
			contract.PodPort(src.ns, src.name), src.mac, src.gwMAC, src.ip, dst, port)
		out := e.traceLB(node, flow, lbDst)
		return strings.Contains(out, fmt.Sprintf("output(%q)", contract.PodPort(want.ns, want.name))), out
	}
	expect := func(what string, src testPod, node string, dst testPod, allowed bool) {
		t.Helper()
		e.eventually(what, func() (bool, string) {
			ok, out := traceFrom(src, node, dst.ip.String(), 8080, dst, "")
			return ok == allowed, out
		})
	}
	expect("no policy: windows pod to windows pod", winOther, "win1", winSrv, true)

	e.createPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "srv-from-cli"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "srv"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "cli")}}, Ports: namedPort("http")}}},
	})
	// The same policy selects pods on both nodes: one port group holds both.
	e.eventually("one port group for both nodes' pods", func() (bool, string) {
		pg := e.nbctl("--bare", "--columns=ports", "find", "port_group", `external_ids:"`+nb.NameKey+`"="default/srv-from-cli"`)
		n := len(strings.Fields(pg))
		return n == 2, pg
	})
	expect("allowed: windows client to windows server", winCli, "win1", winSrv, true)
	expect("allowed: linux client to windows server", linCli, "lin1", winSrv, true)
	expect("allowed: windows client to linux server", winCli, "win1", linSrv, true)
	expect("denied: windows pod outside the peer to windows server", winOther, "win1", winSrv, false)
	expect("denied: windows pod outside the peer to linux server", winOther, "win1", linSrv, false)

	// A Service with a backend on each node, load-balanced from a pod on the Windows node.
	svc := e.createService("srv", corev1.ServiceTypeClusterIP, []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}})
	e.createSlice("srv", "srv-1", []slicePort{{"http", corev1.ProtocolTCP, 8080}},
		sliceEP{winSrv.ip, "win1", true}, sliceEP{linSrv.ip, "lin1", true})
	vip := svc.Spec.ClusterIP
	for _, backend := range []testPod{winSrv, linSrv} {
		e.eventually("windows client through the ClusterIP to "+backend.name, func() (bool, string) {
			return traceFrom(winCli, "win1", vip, 80, backend, backend.ip.String()+":8080")
		})
	}
	// The policy applies to the chosen backend: a pod outside the peer is denied via the VIP.
	e.eventually("windows pod outside the peer, through the ClusterIP, denied", func() (bool, string) {
		ok, out := traceFrom(winOther, "win1", vip, 80, winSrv, winSrv.ip.String()+":8080")
		return !ok, out
	})
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	macRE   = regexp.MustCompile(`(?i)([0-9a-f]{2}:){5}[0-9a-f]{2}`)
	ipRE    = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+(/\d+)?`)
	chassRE = regexp.MustCompile(`chassis-\d+`)
)

// nodeRows lists node's rows of table as ovn-nbctl prints them (every column), with the
// node's name, UUIDs, MACs, addresses and chassis names replaced by placeholders, sorted.
func (e *env) nodeRows(table, node string) []string {
	e.t.Helper()
	out := e.nbctl("--format=csv", "--no-headings", "--data=bare", "find", table,
		fmt.Sprintf(`external_ids:"%s"="%s"`, nb.NameKey, node), fmt.Sprintf(`external_ids:"%s"=Node`, nb.KindKey))
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		l = uuidRE.ReplaceAllString(l, "<uuid>")
		l = macRE.ReplaceAllString(l, "<mac>")
		l = ipRE.ReplaceAllString(l, "<ip>")
		l = chassRE.ReplaceAllString(l, "<chassis>")
		l = strings.ReplaceAll(l, node, "<node>")
		rows = append(rows, l)
	}
	slices.Sort(rows)
	return rows
}
