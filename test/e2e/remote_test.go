//go:build linux

package e2e

import (
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// remoteNode is the cluster's remote chassis (docs/remote-chassis.md): ovs-vswitchd and
// ovsdb-server in its namespace, no ovn-controller there; its ovn-controller runs on a
// controller host of its own and reaches the node only over TLS on the underlay: there
// `ovnt-node remote-controllers` (the manager of 60-remote-controllers.yaml) finds node4
// labelled ovn-transparent.io/remote-chassis=true and runs its ovn-controller, the database
// and OpenFlow connections through the manager's chassis relays.
const remoteNode = "node4"

// TestRemoteChassis: the remote node registers with its own encap IP and nothing of OVN
// runs in its namespace; its pods reach and are reached by pods on a local-mode node and on
// itself; a Service answers with a backend on it and from it; its pods reach the outside
// through its gateway router and a NodePort (externalTrafficPolicy Local) at its address
// reaches its own backend; a NetworkPolicy holds on it;
// a 30 s cut of the controller host's link leaves the installed flows forwarding and the
// same controller catches up when it heals;
// a crash of the controller host leaves the installed flows forwarding for as long as
// it is away, and its return brings the changes made meanwhile and programs new pods;
// and taking the label off stops the node's controller, putting it back starts one that
// brings the node up to date.
func TestRemoteChassis(t *testing.T) {
	rn := cl.Node(remoteNode)
	if rn == nil || rn.Remote == nil {
		t.Fatalf("%s is not a remote chassis in this cluster", remoteNode)
	}
	ctx := t.Context()
	if _, err := rn.Remote.WaitController(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	t.Run("chassis", func(t *testing.T) {
		show, err := cl.Central.SBCtl(ctx, "show")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := harness.ChassisEncaps(show)[remoteNode], "geneve "+rn.IP; len(got) != 1 || got[0] != want {
			t.Errorf("SB chassis %s encaps %v, want [%s]:\n%s", remoteNode, got, want, show)
		}
		if st, err := rn.Remote.AppCtl(ctx, "connection-status"); err != nil || strings.TrimSpace(st) != "connected" {
			t.Errorf("remote ovn-controller connection-status %q %v", st, err)
		}
		// The remote controller must not find an SSL row on the node: it would take the row's
		// files over its own (ovn-controller's update_ssl_config).
		if ssl, err := rn.VSCtl(ctx, "get-ssl"); err != nil || strings.TrimSpace(ssl) != "" {
			t.Errorf("the node's SSL row: %q %v, want none", ssl, err)
		}
		// Nothing in the node's namespace is an ovn-controller.
		out, _ := exec.CommandContext(ctx, "ip", "netns", "pids", rn.Netns).Output()
		for _, pid := range strings.Fields(string(out)) {
			comm, _ := exec.CommandContext(ctx, "cat", "/proc/"+pid+"/comm").Output()
			if strings.TrimSpace(string(comm)) == "ovn-controller" {
				t.Errorf("pid %s in %s's namespace is an ovn-controller", pid, remoteNode)
			}
		}
		// The node's database answers the remote controller's certificate, and no other
		// chassis' (their CA signs ordinary chassis, not remote controllers).
		dbAddr := net.JoinHostPort(rn.IP, strconv.Itoa(harness.RemoteOVSDBPort))
		for _, tc := range []struct {
			who  string
			cert harness.Cert
			ok   bool
		}{{"remote controller", rn.Remote.Cert, true}, {"node1's chassis", cl.Node("node1").SBCert, false}} {
			cfg, err := ovsdb.ClientTLS(ovsdb.Config{PrivateKeyFile: tc.cert.KeyFile, CertificateFile: tc.cert.CertFile,
				CACertFile: cl.Central.PKI.CACert}, "ssl:"+dbAddr)
			if err != nil {
				t.Fatal(err)
			}
			dbs, err := harness.ListDBs(rn.Remote.Netns, dbAddr, cfg)
			if got := err == nil && slices.Contains(strings.Split(dbs, ","), "Open_vSwitch"); got != tc.ok {
				t.Errorf("list_dbs at %s with %s certificate: %q %v, want answered %v", dbAddr, tc.who, dbs, err, tc.ok)
			}
		}
		// br-int's only controller is the passive TLS listener the remote OpenFlow comes in by.
		if ctl, err := rn.VSCtl(ctx, "get-controller", "br-int"); err != nil || strings.TrimSpace(ctl) != "pssl:6653" {
			t.Errorf("br-int controller %q %v, want pssl:6653", ctl, err)
		}
	})

	ns := testNamespace(t)
	a := startPod(t, podSpec(ns, "a", remoteNode))
	b := startPod(t, podSpec(ns, "b", remoteNode))
	c := startPod(t, podSpec(ns, "c", "node1"))
	aIP, cIP := netip.MustParseAddr(a.Status.PodIP), netip.MustParseAddr(c.Status.PodIP)
	t.Run("pod to pod", func(t *testing.T) {
		expectAnswer(t, podNetns(t, a), b.Status.PodIP, ns+"/b", aIP)
		expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
		expectAnswer(t, podNetns(t, c), a.Status.PodIP, ns+"/a", cIP)
	})
	t.Run("node and pods", func(t *testing.T) {
		expectAnswer(t, rn.Netns, a.Status.PodIP, ns+"/a", netip.Addr{})
		expectAnswer(t, rn.Netns, c.Status.PodIP, ns+"/c", netip.Addr{})
	})

	t.Run("service", func(t *testing.T) {
		ports := []corev1.ContainerPort{{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP}}
		startPod(t, workloadPod(ns, "web-r", remoteNode, "web", ports...))
		startPod(t, workloadPod(ns, "web-l", "node1", "web", ports...))
		svc := createService(t, newService(ns, "web", "web", svcPort("http", corev1.ProtocolTCP, 80, tcpPort)))
		backends := []string{ns + "/web-r", ns + "/web-l"}
		for what, from := range map[string]string{"from the remote node's pod": podNetns(t, a), "from node1's pod": podNetns(t, c)} {
			t.Run(what, func(t *testing.T) { expectSpread(t, from, tcp, addrPort(svc.Spec.ClusterIP, 80), backends...) })
		}
	})

	t.Run("north-south", func(t *testing.T) {
		srv := &probe.Server{Name: "external", TCP: []uint16{19300}, UDP: []uint16{19301}}
		if err := harness.InNetns(cl.External.Netns, srv.Start); err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		// Egress through node4's gateway router, SNATed to node4's address.
		expectAnswerPorts(t, podNetns(t, a), cl.External.IP, 19300, 19301, "external", netip.MustParseAddr(rn.IP))
		// A NodePort with externalTrafficPolicy Local at node4: its own backend (web-r, made
		// by the service subtest) answers and sees the external host's address.
		np := newService(ns, "web-local", "web", svcPort("http", corev1.ProtocolTCP, 80, tcpPort))
		np.Spec.Type = corev1.ServiceTypeNodePort
		np.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc := createService(t, np)
		got := waitAnswer(t, cl.External.Netns, tcp, addrPort(rn.IP, nodePort(t, svc, "http")), ns+"/web-r")
		if got.client != netip.MustParseAddr(cl.External.IP) {
			t.Errorf("web-r saw %s, want the external host's %s", got.client, cl.External.IP)
		}
	})

	t.Run("network policy", func(t *testing.T) {
		pns := testNamespace(t)
		p := startPod(t, podSpec(pns, "p", remoteNode))
		q := startPod(t, podSpec(pns, "q", "node1"))
		r := startPod(t, podSpec(pns, "r", remoteNode))
		pAddr := netip.AddrPortFrom(netip.MustParseAddr(p.Status.PodIP), udpPort)
		expectAnswer(t, podNetns(t, q), p.Status.PodIP, pns+"/p", netip.MustParseAddr(q.Status.PodIP))
		denyAllIngress(t, pns)
		waitNoAnswer(t, podNetns(t, q), "udp", pAddr)
		expectNoAnswer(t, podNetns(t, r), "tcp", netip.AddrPortFrom(pAddr.Addr(), tcpPort))
		// Its own node still reaches it (kubelet's probes), as on a local-mode node.
		expectAnswer(t, rn.Netns, p.Status.PodIP, pns+"/p", mgmtIP(t, remoteNode))
	})

	t.Run("connection cut", func(t *testing.T) {
		before := rn.Remote.ControllerPID()
		if err := rn.Remote.Cut(ctx, true); err != nil {
			t.Fatal(err)
		}
		healed := false
		heal := func() {
			if !healed {
				healed = true
				if err := rn.Remote.Cut(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		defer heal()
		// 30 s without the controller: longer than every inactivity probe on the way (OVS's
		// 5 s on the node's listeners, the relay's, ovn-controller's), so the node has dropped
		// its connections by the end. Installed flows keep forwarding meanwhile.
		ports := []corev1.ContainerPort{{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP}}
		startPod(t, workloadPod(ns, "cut", "node1", "cut", ports...))
		cut := createService(t, newService(ns, "cut", "cut", svcPort("http", corev1.ProtocolTCP, 80, tcpPort)))
		waitAnswer(t, podNetns(t, c), tcp, addrPort(cut.Spec.ClusterIP, 80), ns+"/cut")
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
			expectAnswer(t, podNetns(t, c), a.Status.PodIP, ns+"/a", cIP)
			time.Sleep(5 * time.Second)
		}
		// The Service made during the cut has not reached the node's flows.
		expectNoAnswer(t, podNetns(t, a), tcp, addrPort(cut.Spec.ClusterIP, 80))
		heal()
		// The same controller reconnects by itself and brings the node up to date.
		waitAnswer(t, podNetns(t, a), tcp, addrPort(cut.Spec.ClusterIP, 80), ns+"/cut")
		if st, err := rn.Remote.AppCtl(ctx, "connection-status"); err != nil || strings.TrimSpace(st) != "connected" {
			t.Errorf("remote ovn-controller connection-status after the cut %q %v", st, err)
		}
		if after := rn.Remote.ControllerPID(); after != before {
			t.Errorf("ovn-controller restarted during the cut (pid %d, then %d): the test should see it reconnect", before, after)
		}
		expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
	})

	t.Run("controller host restart", func(t *testing.T) {
		rn.Remote.Kill()
		// br-int is fail_mode=secure: without its controller it keeps the flows it has, also
		// after a while.
		expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
		// A Service made while the controller is away reaches node4's flows only when it
		// returns.
		ports := []corev1.ContainerPort{{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP}}
		startPod(t, workloadPod(ns, "late", "node1", "late", ports...))
		late := createService(t, newService(ns, "late", "late", svcPort("http", corev1.ProtocolTCP, 80, tcpPort)))
		waitAnswer(t, podNetns(t, c), tcp, addrPort(late.Spec.ClusterIP, 80), ns+"/late")
		time.Sleep(10 * time.Second)
		expectAnswer(t, podNetns(t, c), a.Status.PodIP, ns+"/a", cIP)
		expectNoAnswer(t, podNetns(t, a), tcp, addrPort(late.Spec.ClusterIP, 80))
		if err := rn.Remote.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := rn.Remote.WaitController(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, podNetns(t, a), tcp, addrPort(late.Spec.ClusterIP, 80), ns+"/late")
		// A pod created after the return is programmed by the new controller.
		d := startPod(t, podSpec(ns, "d", remoteNode))
		expectAnswer(t, podNetns(t, d), c.Status.PodIP, ns+"/c", netip.MustParseAddr(d.Status.PodIP))
		expectAnswer(t, podNetns(t, c), d.Status.PodIP, ns+"/d", cIP)
		expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
	})

	t.Run("label removed and put back", func(t *testing.T) {
		pid := rn.Remote.ControllerPID()
		if pid == 0 {
			t.Fatal("no remote ovn-controller running")
		}
		if err := rn.Remote.Label(ctx, ""); err != nil {
			t.Fatal(err)
		}
		relabel := sync.OnceValue(func() error { return rn.Remote.Label(ctx, "true") })
		defer relabel()
		// No longer remote (node4 is not a Windows node): the manager stops its controller.
		deadline := time.Now().Add(time.Minute)
		for syscall.Kill(pid, 0) == nil || rn.Remote.ControllerPID() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("ovn-controller (pid %d) still running a minute after the label was removed", pid)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// So a Service made now does not reach node4's flows, while the installed ones
		// keep forwarding.
		ports := []corev1.ContainerPort{{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP}}
		startPod(t, workloadPod(ns, "unlabelled", "node1", "unlabelled", ports...))
		svc := createService(t, newService(ns, "unlabelled", "unlabelled", svcPort("http", corev1.ProtocolTCP, 80, tcpPort)))
		waitAnswer(t, podNetns(t, c), tcp, addrPort(svc.Spec.ClusterIP, 80), ns+"/unlabelled")
		time.Sleep(5 * time.Second)
		expectNoAnswer(t, podNetns(t, a), tcp, addrPort(svc.Spec.ClusterIP, 80))
		expectAnswer(t, podNetns(t, a), c.Status.PodIP, ns+"/c", aIP)
		// The label back: a new controller, and the Service reaches node4.
		if err := relabel(); err != nil {
			t.Fatal(err)
		}
		after, err := rn.Remote.WaitController(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if after == pid {
			t.Errorf("the same ovn-controller (pid %d) after the label came back", pid)
		}
		waitAnswer(t, podNetns(t, a), tcp, addrPort(svc.Spec.ClusterIP, 80), ns+"/unlabelled")
	})
}
