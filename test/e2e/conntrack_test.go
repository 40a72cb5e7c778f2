//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// udpFlow is a UDP client that keeps one source port, as a long-lived UDP client (a DNS
// forwarder, a game or VoIP client) does: every datagram refreshes the same conntrack
// entry, so the load balancer's choice of backend is made once.
type udpFlow struct {
	what string
	conn *net.UDPConn
	dst  netip.AddrPort
}

// newUDPFlow opens the client's socket in netns (it stays there) on a fixed source port.
func newUDPFlow(t *testing.T, what, netns string, srcPort int, dst netip.AddrPort) *udpFlow {
	t.Helper()
	f := &udpFlow{what: what, dst: dst}
	if err := harness.InNetns(netns, func() error {
		var err error
		f.conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: srcPort})
		return err
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { f.conn.Close() })
	return f
}

// exchange sends one datagram and returns the backend that answered, or an error when
// none answered within a short wait.
func (f *udpFlow) exchange() (string, error) {
	if _, err := f.conn.WriteToUDPAddrPort([]byte("probe\n"), f.dst); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	_ = f.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := f.conn.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "", fmt.Errorf("%s: no answer from %s", f.what, f.dst)
	}
	if err != nil {
		return "", err
	}
	name, _, err := probe.ParseLine(string(buf[:n]))
	return name, err
}

// waitBackend sends on every flow, several times a second (well within any UDP conntrack
// timeout, so the entries never expire), until each flow is answered by want.
func waitBackend(t *testing.T, want string, flows ...*udpFlow) {
	t.Helper()
	done := map[*udpFlow]bool{}
	last := map[*udpFlow]string{}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	err := poll.Until(ctx, "every flow answered by "+want, 100*time.Millisecond, func() (bool, error) {
		for _, f := range flows {
			got, err := f.exchange()
			switch {
			case err != nil:
				last[f] = err.Error()
			case got == want:
				done[f] = true
			default:
				last[f] = f.what + ": answered by " + got
			}
		}
		for _, f := range flows {
			if !done[f] {
				return false, errors.New(last[f])
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// udpService is a NodePort Service of UDP port 53 to the workload's UDP port of the pods
// labelled app=udpsrv, with a client pod on node1, and the fixed-source-port flows to it:
// a pod to the ClusterIP, a pod to the NodePort on node1's and on node2's IP, and node1
// itself (host network) to the ClusterIP.
func udpService(t *testing.T, ns string) (svc *corev1.Service, client *corev1.Pod, flows []*udpFlow) {
	client = startPod(t, workloadPod(ns, "client", "node1", "client"))
	svc = newService(ns, "udp", "udpsrv", svcPort("udp", corev1.ProtocolUDP, 53, udpPort))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc = createService(t, svc)
	np := nodePort(t, svc, "udp")
	ips := nodeIPs()
	clientNS := podNetns(t, client)
	flows = []*udpFlow{
		newUDPFlow(t, "pod to ClusterIP", clientNS, 41001, addrPort(svc.Spec.ClusterIP, 53)),
		newUDPFlow(t, "pod to node1's NodePort", clientNS, 41002, addrPort(ips[0], np)),
		newUDPFlow(t, "pod to node2's NodePort", clientNS, 41003, addrPort(ips[1], np)),
		newUDPFlow(t, "node1 to ClusterIP", cl.Node("node1").Netns, 41004, addrPort(svc.Spec.ClusterIP, 53)),
	}
	return svc, client, flows
}

// TestServiceUDPBackendReplaced: the UDP clients of udpService, each keeping its source
// port, reach the Service's only backend; the backend is deleted and another pod with a new
// IP replaces it. The clients' next datagrams reach the new backend: the node deletes the
// conntrack entries of the removed backend (node/conntrack). Before that, each client
// stayed on the entry of the deleted pod for as long as it kept sending.
func TestServiceUDPBackendReplaced(t *testing.T) {
	ns := testNamespace(t)
	oldPod := startPod(t, workloadPod(ns, "old", "node2", "udpsrv"))
	svc, client, flows := udpService(t, ns)
	// The load balancer has its backend before the flows start (probes from other source
	// ports): this test is about the backend going away, not about the first one.
	waitAnswer(t, podNetns(t, client), udp, addrPort(svc.Spec.ClusterIP, 53), ns+"/old")
	for _, f := range flows {
		waitAnswer(t, cl.Node("node1").Netns, udp, f.dst, ns+"/old")
	}
	waitBackend(t, ns+"/old", flows...)

	// The new backend starts first, so that it cannot get the old one's address back (the
	// stale entries would then lead to it by chance). The flows stay on the old backend
	// while it lives: their entries are not stale.
	newPod := startPod(t, workloadPod(ns, "new", "node2", "udpsrv"))
	if newPod.Status.PodIP == oldPod.Status.PodIP {
		t.Fatalf("the new pod has the old one's address %s", newPod.Status.PodIP)
	}
	waitBackend(t, ns+"/old", flows...)
	deletePod(t, ns, "old")
	waitBackend(t, ns+"/new", flows...)
}

// TestServiceUDPFirstEndpoint: the UDP clients of udpService send while the Service has no
// endpoint; then its first backend starts. Their next datagrams reach it. The node deletes
// entries made while the Service had none (kube-proxy does the same); with the load
// balancer's reject in place, though, OVN leaves no such entry, and this test passes without
// the cleaner too: it guards the case, it did not find a defect.
func TestServiceUDPFirstEndpoint(t *testing.T) {
	ns := testNamespace(t)
	_, _, flows := udpService(t, ns)
	for range 3 {
		for _, f := range flows {
			if got, err := f.exchange(); err == nil {
				t.Fatalf("%s: answered by %s without endpoints", f.what, got)
			}
		}
	}
	startPod(t, workloadPod(ns, "first", "node2", "udpsrv"))
	waitBackend(t, ns+"/first", flows...)
}
