//go:build linux

package controller

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// TestServices runs the master against a real API server and NB/northd with Services and
// EndpointSlices (written by the test, as the EndpointSlice controller would), and checks the
// load balancers it leaves with ovn-nbctl and ovn-trace: ClusterIP over three protocols and
// two nodes, reject, affinity, NodePort templates, externalTrafficPolicy Local, type and port
// changes, deletion and bad input.
func TestServices(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	e.startMaster(testConfig("10.244.0.0/16"))
	pa, pb := e.twoNodePods()
	ipA, ipB := pa.IPs[0].Addr(), pb.IPs[0].Addr()
	gwMAC := contract.MACFromIP(pa.Gateways[0])
	flow := func(dst, l4 string) string {
		return fmt.Sprintf(`inport == "default_a" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && %s`,
			pa.MAC, gwMAC, ipA, dst, l4)
	}
	// The cases run in order on one cluster, each building on the state the one before left;
	// each is named, and a failure in one does not hide the others.
	var web *corev1.Service
	var vip string
	var np int32
	parent := e

	t.Run("ClusterIP over TCP, UDP and SCTP", func(t *testing.T) {
		e := parent.in(t)
		// ClusterIP: TCP and UDP on port 53 both, TCP 80 with a named target port, SCTP.
		web = e.createService("web", corev1.ServiceTypeClusterIP, []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(5353)},
			{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9000, TargetPort: intstr.FromInt32(9000)},
		})
		vip = web.Spec.ClusterIP
		// The pods name their http port differently: one slice each.
		e.createSlice("web", "web-a", []slicePort{{"http", corev1.ProtocolTCP, 8080}, {"dns", corev1.ProtocolUDP, 5353},
			{"dns-tcp", corev1.ProtocolTCP, 5353}, {"sctp", corev1.ProtocolSCTP, 9000}}, sliceEP{ipA, "node1", true})
		e.createSlice("web", "web-b", []slicePort{{"http", corev1.ProtocolTCP, 8081}, {"dns", corev1.ProtocolUDP, 5353},
			{"dns-tcp", corev1.ProtocolTCP, 5353}, {"sctp", corev1.ProtocolSCTP, 9000}}, sliceEP{ipB, "node2", true})
		e.eventually("web load balancers", func() (bool, string) {
			out := e.nbctl("lb-list") // names cut at 16 characters
			return strings.Contains(out, "sctp") && strings.Contains(out, ipB.String()+":8081"), out
		})
		e.wantLBs("Service_default/kubernetes_TCP_cluster", "Service_default/web_SCTP_cluster", "Service_default/web_TCP_cluster", "Service_default/web_UDP_cluster")
		tcpLB := e.lbGet("Service_default/web_TCP_cluster")
		for _, want := range []string{
			// Backends are listed in address order, and which node got the lower subnet
			// depends on which node's sync ran first.
			fmt.Sprintf(`"%s:80"="%s"`, vip, sortedJoin(ipA.String()+":8080", ipB.String()+":8081")),
			fmt.Sprintf(`"%s:53"="%s"`, vip, sortedJoin(ipA.String()+":5353", ipB.String()+":5353")),
			`reject="true"`, `"k8s.ovn-transparent.io/owner"="default/web"`, `"k8s.ovn-transparent.io/scope"=tcp`,
		} {
			if !strings.Contains(tcpLB, want) {
				t.Errorf("TCP LB lacks %s:\n%s", want, tcpLB)
			}
		}
		// One group holds the cluster LBs; every node switch and gateway router references it.
		group := e.nbctl("--bare", "--columns=load_balancer", "find", "load_balancer_group", "name="+nb.ClusterLBGroupName)
		for _, lb := range []string{"web_TCP", "web_UDP", "web_SCTP"} {
			uuid := e.nbctl("--bare", "--columns=_uuid", "find", "load_balancer", "name=Service_default/"+lb+"_cluster")
			if !strings.Contains(group, uuid) {
				t.Errorf("%s (%s) not in the group %q", lb, uuid, group)
			}
		}
		groupUUID := e.nbctl("--bare", "--columns=_uuid", "find", "load_balancer_group", "name="+nb.ClusterLBGroupName)
		for _, row := range []string{"logical_switch node1", "logical_switch node2", "logical_router GR_node1", "logical_router GR_node2"} {
			f := strings.Fields(row)
			e.eventually(row+" references the group", func() (bool, string) {
				got := e.nbctl("get", f[0], f[1], "load_balancer_group")
				return strings.Contains(got, groupUUID), got
			})
		}
		// ovn-trace: pod a reaches each backend through the VIP, over every protocol; hairpin too.
		for _, tc := range []struct{ l4, lbDst, port string }{
			{"tcp && tcp.src == 33333 && tcp.dst == 80", ipB.String() + ":8081", "default_b"},
			{"tcp && tcp.src == 33333 && tcp.dst == 80", ipA.String() + ":8080", "default_a"}, // hairpin
			{"udp && udp.src == 33333 && udp.dst == 53", ipB.String() + ":5353", "default_b"},
			{"sctp && sctp.src == 33333 && sctp.dst == 9000", ipB.String() + ":9000", "default_b"},
		} {
			out := e.traceLB("node1", flow(vip, tc.l4), tc.lbDst)
			if !strings.Contains(out, `output("`+tc.port+`")`) {
				t.Errorf("%s via %s to %s: not delivered:\n%s", tc.l4, vip, tc.lbDst, out)
			}
		}
	})

	t.Run("no endpoints: the VIP rejects", func(t *testing.T) {
		e := parent.in(t)
		// No endpoints: the VIP rejects (TCP reset) rather than dropping.
		empty := e.createService("empty", corev1.ServiceTypeClusterIP, []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}})
		e.eventually("empty LB", func() (bool, string) {
			out := e.lbGet("Service_default/empty_TCP_cluster")
			return strings.Contains(out, fmt.Sprintf(`"%s:80"=""`, empty.Spec.ClusterIP)), out
		})
		if out := e.traceLB("node1", flow(empty.Spec.ClusterIP, "tcp && tcp.src == 33333 && tcp.dst == 80"), ""); !strings.Contains(out, "tcp_reset") {
			t.Errorf("no endpoints: no TCP reset:\n%s", out)
		}
	})

	t.Run("session affinity timeout", func(t *testing.T) {
		e := parent.in(t)
		e.updateService("web", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(5))}}
		})
		e.eventually("affinity_timeout", func() (bool, string) {
			out := e.lbGet("Service_default/web_TCP_cluster")
			return strings.Contains(out, `affinity_timeout="5"`), out
		})
	})

	t.Run("NodePort: templates on the switches, the gateway VIP on the routers", func(t *testing.T) {
		e := parent.in(t)
		e.updateService("web", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = s.Spec.Ports[:1] // ports change too: UDP and SCTP go
			// Affinity comes back in the next subtest: it has no template.
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
		})
		web = e.getService("web")
		np = web.Spec.Ports[0].NodePort
		e.eventually("NodePort template", func() (bool, string) {
			out := e.lbGet("Service_default/web_TCP_cluster")
			return strings.Contains(out, fmt.Sprintf(`"^NODEIP:%d"=`, np)) && strings.Contains(out, `template="true"`) &&
				strings.Contains(out, fmt.Sprintf(`"169.254.100.1:%d"=`, np)), out
		})
		// From outside, the node agent's bridge rewrites nodeIP:nodePort to 169.254.100.1 for the
		// GR (a template VIP on the GR misses lb_force_snat_ip, see contract.NodePortGatewayIP).
		npFlow := fmt.Sprintf(`inport == "rtoe-GR_node1" && eth.src == 0a:00:00:00:00:99 && eth.dst == %s && ip4.src == 172.18.0.100 && ip4.dst == 169.254.100.1 && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == %d`,
			chassisOf(1).GatewayMAC, np)
		e.nbctl("--wait=sb", "sync")
		if full, err := exec.CommandContext(e.ctx, "ovn-trace", "--db="+e.central.SBRemote, "--ct=new", "--ct=new", "--ct=new", "--ct=new", "GR_node1", npFlow).CombinedOutput(); err != nil ||
			!containsFields(strings.ReplaceAll(string(full), ",", " "), "ct_lb_mark(backends="+min(ipA.String()+":8080", ipB.String()+":8081"),
				max(ipA.String()+":8080", ipB.String()+":8081")+";", "force_snat);") {
			t.Errorf("external -> NodePort on GR_node1 is not load-balanced with force SNAT: %v\n%s", err, full)
		}
		e.wantLBs("Service_default/empty_TCP_cluster", "Service_default/kubernetes_TCP_cluster", "Service_default/web_TCP_cluster")
		// The ClusterIP of a load balancer that now has template VIPs still works (ovn-trace
		// warns about the template flows it cannot parse and goes on).
		if out := e.traceLB("node1", flow(vip, "tcp && tcp.src == 33333 && tcp.dst == 80"), ipB.String()+":8081"); !strings.Contains(out, `output("default_b")`) {
			t.Errorf("ClusterIP of a NodePort Service:\n%s", out)
		}
		if out, err := e.central.SBCtl(e.ctx, "lflow-list", "node1"); err != nil || !strings.Contains(out, fmt.Sprintf("ip4.dst == ^NODEIP && tcp.dst == %d", np)) {
			t.Errorf("no templated NodePort flow on node1's switch (%v)", err)
		}
		if out := e.nbctl("--bare", "--columns=variables", "find", "chassis_template_var", "chassis=chassis-1"); out != "NODEIP=172.18.0.1" {
			t.Errorf("chassis-1 template variables %q", out)
		}
	})

	// Session affinity on a NodePort: northd writes an affinity VIP into commit_lb_aff as a
	// quoted literal that ovn-controller does not expand, so a ^NODEIP template there fails
	// to parse and vswitchd rejects ovn-controller's whole flow bundle (every pod of every
	// node lost its updates: the upstream affinity NodePort Conformance test found it).
	// The cluster LB gets a VIP per node IP instead, and no flow names the template.
	t.Run("NodePort with session affinity: a VIP per node IP, no template", func(t *testing.T) {
		e := parent.in(t)
		e.updateService("web", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(5))}}
		})
		e.eventually("a NodePort VIP per node IP", func() (bool, string) {
			out := e.lbGet("Service_default/web_TCP_cluster")
			return strings.Contains(out, fmt.Sprintf(`"172.18.0.1:%d"=`, np)) && strings.Contains(out, fmt.Sprintf(`"172.18.0.2:%d"=`, np)) &&
				!strings.Contains(out, "^NODEIP") && !strings.Contains(out, "template=") && strings.Contains(out, `affinity_timeout="5"`), out
		})
		e.nbctl("--wait=sb", "sync")
		out, err := e.central.SBCtl(e.ctx, "lflow-list", "node1")
		if err != nil || strings.Contains(out, "^NODEIP") {
			t.Errorf("a logical flow of node1's switch still names ^NODEIP with affinity on (%v)", err)
		}
		if !strings.Contains(out, fmt.Sprintf("ip4.dst == 172.18.0.2 && tcp.dst == %d", np)) ||
			!strings.Contains(out, fmt.Sprintf(`commit_lb_aff(vip = "172.18.0.2:%d"`, np)) {
			t.Errorf("node1's switch has no load-balancing and affinity flows for node2's NodePort %d", np)
		}
	})

	// externalTrafficPolicy Local: per-node LBs on the GRs with local endpoints only, the
	// cluster LB keeps the ClusterIP only.
	t.Run("externalTrafficPolicy Local", func(t *testing.T) {
		e := parent.in(t)
		e.updateService("web", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			// OVN 23.03's affinity learn stage consumes the first packet (README), which ovn-trace
			// shows too; the trace below is about the local backend and the client address.
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
		})
		// Waiting for the rows by name: GR_node2's load balancers through the group already
		// had node2's NodePort and pod b as a backend in the case before (affinity).
		e.eventually("per-node LBs", func() (bool, string) {
			out := e.nbctl("--bare", "--columns=name", "list", "Load_Balancer")
			return strings.Contains(out, "Service_default/web_TCP_node_router_node2") &&
				strings.Contains(out, "Service_default/web_TCP_node_switch_node2"), out
		})
		e.wantLBs("Service_default/empty_TCP_cluster", "Service_default/kubernetes_TCP_cluster", "Service_default/web_TCP_cluster",
			"Service_default/web_TCP_node_router_node1", "Service_default/web_TCP_node_router_node2",
			"Service_default/web_TCP_node_switch_node1", "Service_default/web_TCP_node_switch_node2")
		if out := e.lbGet("Service_default/web_TCP_node_router_node1"); !strings.Contains(out, fmt.Sprintf(`"172.18.0.1:%d"="%s:8080"`, np, ipA)) ||
			!strings.Contains(out, `skip_snat="true"`) {
			t.Errorf("node1 LB:\n%s", out)
		}
		if out := e.lbGet("Service_default/web_TCP_cluster"); strings.Contains(out, "NODEIP") {
			t.Errorf("cluster LB of an ETP=Local service keeps its NodePort:\n%s", out)
		}
		// ovn-trace from the external network: node2's GR sends node2's NodePort to pod b only,
		// without SNAT (the trace ends where the GR resolves the cluster router by ARP, since
		// dynamic_neigh_routers is on).
		grFlow := fmt.Sprintf(`inport == "rtoe-GR_node2" && eth.src == 0a:00:00:00:00:99 && eth.dst == %s && ip4.src == 172.18.0.100 && ip4.dst == 172.18.0.2 && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == %d`,
			chassisOf(2).GatewayMAC, np)
		full, err := exec.CommandContext(e.ctx, "ovn-trace", "--db="+e.central.SBRemote, "--ct=new", "--ct=new", "--ct=new", "--ct=new", "GR_node2", grFlow).CombinedOutput()
		if err != nil || !strings.Contains(string(full), fmt.Sprintf("ct_lb_mark(backends=%s:8081; skip_snat)", ipB)) ||
			strings.Contains(e.traceLB("GR_node2", grFlow, ""), "ip4.src =") || !strings.Contains(string(full), `outport = "rtoj-GR_node2"`) {
			t.Errorf("external -> node2 NodePort (ETP Local) must go to pod b with the client address: %v\n%s", err, full)
		}
		// A pod reaching its own node's NodePort is load-balanced on its node switch to that
		// node's endpoints: routed on, the cluster router's policy for the node IP would
		// take it to the management port, where the host has no NodePort (the upstream
		// "fallback to local terminating endpoints ... externalTrafficPolicy=Local" test).
		if out := e.traceLB("node1", flow("172.18.0.1", fmt.Sprintf("tcp && tcp.src == 33333 && tcp.dst == %d", np)), ""); !strings.Contains(out, `output("default_a")`) {
			t.Errorf("pod a -> its own node's NodePort (ETP Local) must reach node1's endpoint, pod a:\n%s", out)
		}
	})

	t.Run("back to ClusterIP, then deleted", func(t *testing.T) {
		e := parent.in(t)
		// Back to ClusterIP: per-node LBs and the NodePort go. Then delete: nothing of web remains.
		e.updateService("web", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.ExternalTrafficPolicy = ""
			s.Spec.Ports[0].NodePort = 0
		})
		e.eventually("ClusterIP again", func() (bool, string) {
			out := e.nbctl("--bare", "--columns=name", "list", "load_balancer")
			return !strings.Contains(out, "node_router"), out
		})
		e.wantLBs("Service_default/empty_TCP_cluster", "Service_default/kubernetes_TCP_cluster", "Service_default/web_TCP_cluster")
		for _, name := range []string{"web", "empty"} {
			if err := e.kube.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.eventually("services deleted", func() (bool, string) {
			names := e.names("load_balancer")
			return len(names) == 1, fmt.Sprint(names)
		})
		e.wantLBs("Service_default/kubernetes_TCP_cluster")
	})

	t.Run("host-network endpoints: a node reaches its own through the ClusterIP", func(t *testing.T) {
		e := parent.in(t)
		// Endpoints at node1's and node2's addresses (host-network pods). node1's host
		// reaches the ClusterIP from its management port; balanced to its own address, the
		// packet must come back to it as a hairpin from the VIP, not from its own address
		// (upstream "Services should respect internalTrafficPolicy=Local Pod and Node, to
		// Pod (hostNetwork: true)" and "Networking Granular Checks: Services should function
		// for service endpoints using hostNetwork").
		hn := e.createService("hostnet", corev1.ServiceTypeNodePort, []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(10180)}})
		e.createSlice("hostnet", "hostnet-1", []slicePort{{"http", corev1.ProtocolTCP, 10180}},
			sliceEP{netip.MustParseAddr("172.18.0.1"), "node1", true}, sliceEP{netip.MustParseAddr("172.18.0.2"), "node2", true})
		mgmt1 := contract.ManagementIP(e.nodeSubnet("node1"))
		e.eventually("hostnet's switch load balancers", func() (bool, string) {
			out := e.lbGet("Service_default/hostnet_TCP_node_switch_node1")
			return strings.Contains(out, fmt.Sprintf(`"%s:80"="%s"`, hn.Spec.ClusterIP, sortedJoin(mgmt1.String()+":10180", "172.18.0.2:10180"))), out
		})
		if out := e.lbGet("Service_default/hostnet_TCP_node_switch_node2"); !strings.Contains(out, "172.18.0.1:10180") {
			t.Errorf("node2's switch must keep node1's address:\n%s", out)
		}
		if out := e.lbGet("Service_default/hostnet_TCP_cluster"); strings.Contains(out, hn.Spec.ClusterIP) {
			t.Errorf("the cluster LB keeps the ClusterIP, which the switch LBs carry:\n%s", out)
		}
		hostFlow := fmt.Sprintf(`inport == "k8s-node1" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == 80`,
			contract.MACFromIP(mgmt1), gwMAC, mgmt1, hn.Spec.ClusterIP)
		// ovn-trace --minimal leaves the hairpin SNAT out; the full trace names it.
		e.nbctl("--wait=sb", "sync")
		full, err := exec.CommandContext(e.ctx, "ovn-trace", "--db="+e.central.SBRemote, "--ct=new", "--ct=new", "--ct=new",
			"--lb-dst="+mgmt1.String()+":10180", "node1", hostFlow).CombinedOutput()
		if err != nil || !strings.Contains(string(full), "ct_snat_to_vip") || !strings.Contains(string(full), "nat(src="+hn.Spec.ClusterIP+")") ||
			!strings.Contains(string(full), `output to "k8s-node1"`) {
			t.Errorf("node1's host -> ClusterIP -> its own host-network endpoint: must come back to it from the VIP: %v\n%s", err, full)
		}
		// From the external network to node1's NodePort (the bridge rewrote the address to
		// 169.254.100.1): node1's gateway router owns node1's address and cannot forward to
		// it; it balances to node1's management address instead, force-SNATed.
		e.eventually("hostnet's router load balancers", func() (bool, string) {
			out := e.lbGet("Service_default/hostnet_TCP_node_router_node1")
			return strings.Contains(out, mgmt1.String()+":10180"), out
		})
		hnp := hn.Spec.Ports[0].NodePort
		grFlow := fmt.Sprintf(`inport == "rtoe-GR_node1" && eth.src == 0a:00:00:00:00:99 && eth.dst == %s && ip4.src == 172.18.0.100 && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == %d`,
			chassisOf(1).GatewayMAC, contract.NodePortGatewayIP, hnp)
		full, err = exec.CommandContext(e.ctx, "ovn-trace", "--db="+e.central.SBRemote, "--ct=new", "--ct=new", "--ct=new", "--ct=new",
			"--lb-dst="+mgmt1.String()+":10180", "GR_node1", grFlow).CombinedOutput()
		if err != nil || !strings.Contains(string(full), "ct_lb_mark(backends="+sortedJoin(mgmt1.String()+":10180", "172.18.0.2:10180")+"; force_snat)") ||
			!strings.Contains(string(full), `outport = "rtoj-GR_node1"`) {
			t.Errorf("external -> node1's NodePort -> node1's host-network endpoint: must go to its management address, force-SNATed: %v\n%s", err, full)
		}
		if err := e.kube.CoreV1().Services("default").Delete(ctx, "hostnet", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad input: an IPv6 external IP", func(t *testing.T) {
		e := parent.in(t)
		// Bad input: an IPv6 external IP gets an Event; the IPv4 parts keep working.
		bad := e.createService("bad", corev1.ServiceTypeClusterIP, []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"fd00::10"} })
		e.waitEvent("bad", "UnsupportedIPFamily")
		e.eventually("bad's IPv4 VIP", func() (bool, string) {
			out := e.lbGet("Service_default/bad_TCP_cluster")
			return strings.Contains(out, bad.Spec.ClusterIP+":80"), out
		})
	})
	parent.checkEveryRowOwned()
}

type slicePort struct {
	name  string
	proto corev1.Protocol
	port  int32
}

type sliceEP struct {
	ip    netip.Addr
	node  string
	ready bool
}

func (e *env) createService(name string, typ corev1.ServiceType, ports []corev1.ServicePort, mods ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Ports: ports, Selector: map[string]string{"app": name}}}
	for _, m := range mods {
		m(s)
	}
	s, err := e.kube.CoreV1().Services("default").Create(e.ctx, s, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) getService(name string) *corev1.Service {
	e.t.Helper()
	s, err := e.kube.CoreV1().Services("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) updateService(name string, mod func(*corev1.Service)) {
	e.t.Helper()
	s := e.getService(name)
	mod(s)
	if _, err := e.kube.CoreV1().Services("default").Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createSlice(svc, name string, ports []slicePort, eps ...sliceEP) {
	e.t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.name), Protocol: ptr.To(p.proto), Port: ptr.To(p.port)})
	}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep.ip.String()}, NodeName: ptr.To(ep.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ep.ready)}})
	}
	if _, err := e.kube.DiscoveryV1().EndpointSlices("default").Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// wantLBs checks the exact set of load balancer names in the NB.
func (e *env) wantLBs(want ...string) {
	e.t.Helper()
	wantSet(e.t, "load balancers", e.names("load_balancer"), want...)
}

func (e *env) lbGet(name string) string {
	e.t.Helper()
	return e.nbctl("--columns=name,vips,options,external_ids,protocol", "find", "load_balancer", "name=\""+name+"\"")
}

// traceLB is trace with ovn-trace's --lb-dst choosing the backend, if lbDst is set.
func (e *env) traceLB(datapath, flow, lbDst string) string {
	e.t.Helper()
	e.nbctl("--wait=sb", "sync")
	args := []string{"--db=" + e.central.SBRemote, "--minimal"}
	for range 6 {
		args = append(args, "--ct=new")
	}
	if lbDst != "" {
		args = append(args, "--lb-dst="+lbDst)
	}
	out, err := exec.CommandContext(e.ctx, "ovn-trace", append(args, datapath, flow)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("ovn-trace %s %q: %v\n%s", datapath, flow, err, out)
	}
	return string(out)
}

// TestServicesAcrossRestart: a master starting on an NB that holds Services' load
// balancers (the start-up batch path) leaves exactly the rows the current Services want: a
// Service deleted and a slice changed while no master ran are caught up, nothing is
// duplicated, and the load balancers kept are the same rows.
func TestServicesAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	m := e.startMaster(cfg)
	e.createNode("node1", chassisOf(1))
	ports := []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}
	for _, name := range []string{"s1", "s2", "s3"} {
		e.createService(name, corev1.ServiceTypeClusterIP, ports)
		e.createSlice(name, name+"-x", []slicePort{{"http", corev1.ProtocolTCP, 8080}}, sliceEP{netip.MustParseAddr("10.244.0.10"), "node1", true})
	}
	e.eventually("three LBs with a backend", func() (bool, string) {
		out := e.nbctl("--bare", "--columns=vips", "list", "load_balancer")
		return strings.Count(out, "10.244.0.10:8080") == 3, out
	})
	e.settle(m)
	keep := e.nbctl("--bare", "--columns=_uuid", "find", "load_balancer", `name="Service_default/s1_TCP_cluster"`)
	m.stop()

	if err := e.kube.CoreV1().Services("default").Delete(ctx, "s3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := e.kube.DiscoveryV1().EndpointSlices("default").Get(ctx, "s2-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints[0].Addresses = []string{"10.244.0.11"}
	if _, err := e.kube.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	m = e.startMaster(cfg)
	e.eventually("s3 gone, s2 moved", func() (bool, string) {
		names := e.names("load_balancer")
		return len(names) == 3 && strings.Contains(e.lbGet("Service_default/s2_TCP_cluster"), "10.244.0.11:8080"), fmt.Sprint(names)
	})
	e.settle(m)
	e.wantLBs("Service_default/kubernetes_TCP_cluster", "Service_default/s1_TCP_cluster", "Service_default/s2_TCP_cluster")
	if got := e.nbctl("--bare", "--columns=_uuid", "find", "load_balancer", `name="Service_default/s1_TCP_cluster"`); got != keep {
		t.Errorf("s1's load balancer was replaced: %s, was %s", got, keep)
	}
	if n := strings.Count(e.nbctl("--bare", "--columns=load_balancer", "list", "load_balancer_group"), "-") / 4; n != 3 {
		t.Errorf("the group holds %d load balancers, want 3", n)
	}
	e.checkEveryRowOwned()
}

// sortedJoin joins backends in the order the master lists them: sorted.
func sortedJoin(backends ...string) string {
	return strings.Join(slices.Sorted(slices.Values(backends)), ",")
}
