//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/test/bench/benchutil"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// packetInRounds is how many times each figure of BenchmarkRemoteChassis is measured.
const packetInRounds = 15

// BenchmarkRemoteChassis prints what a remote chassis (node4: ovn-controller on another
// host, docs/remote-chassis.md) costs next to a local one (node1), each figure the p50 and
// max of packetInRounds measurements; nothing is asserted:
//   - pod-ready: a pod's creation until it is Ready (the CNI ADD waits for ovn-controller to
//     bind and install the port, over the relay on the remote node);
//   - reject: a TCP connection to a Service without endpoints until its reset, which
//     ovn-controller makes (a packet-in and a packet-out per connection);
//   - arp-cold: a TCP connection from a pod to an address of the external host that the
//     node's gateway router has never seen: ARP resolution through ovn-controller (packet-in,
//     ARP request out, reply packet-in, MAC_Binding written to the SB, flows back) and the
//     buffered first packet. arp-learn is the time from then until the node's br-int has
//     the MAC binding's flow (ovn-controller wrote the binding to the SB and got it back):
//     a connection in that window loses its first SYN to another ARP round (about 1 s).
//     arp-warm is a connection after it.
//   - service: a ClusterIP Service created (its backend on node1) until a pod on the node
//     connects to it: master, NB, northd, SB, ovn-controller, flows (10 ms resolution).
//
// Run it with `go test ./test/e2e -run '^$' -bench RemoteChassis -benchtime 1x`.
func BenchmarkRemoteChassis(b *testing.B) {
	ns := testNamespace(b)
	ext := &probe.Server{Name: "external", TCP: []uint16{19200}}
	if err := harness.InNetns(cl.External.Netns, ext.Start); err != nil {
		b.Fatal(err)
	}
	defer ext.Close()
	empty := createService(b, newService(ns, "empty", "nothing", svcPort("http", corev1.ProtocolTCP, 80, 8080)))
	startPod(b, workloadPod(ns, "web", "node1", "web", corev1.ContainerPort{Name: "tcp", ContainerPort: tcpPort, Protocol: corev1.ProtocolTCP}))
	if b.N > 1 {
		b.Fatal("run it with -benchtime 1x: every run needs addresses of the external host no gateway router has seen")
	}
	for i := 0; i < b.N; i++ {
		for _, node := range []string{"node1", remoteNode} {
			kind := "local"
			if cl.Node(node).Remote != nil {
				kind = "remote"
			}
			var ready []time.Duration
			var client *corev1.Pod
			for r := 0; r < packetInRounds; r++ {
				start := time.Now()
				client = startPod(b, podSpec(ns, fmt.Sprintf("%s-%d-%d", node, i, r), node))
				ready = append(ready, time.Since(start))
			}
			from := podNetns(b, client)
			refused := measure(b, func() error {
				err := dialFrom(from, net.JoinHostPort(empty.Spec.ClusterIP, "80"))
				if !errors.Is(err, syscall.ECONNREFUSED) {
					return fmt.Errorf("want a reset, got %v", err)
				}
				return nil
			})
			// A fresh address of the external host per round: a known one would be learnt
			// again at once (gateway routers learn from every ARP request on the underlay).
			var cold, learn, warm []time.Duration
			for r := 0; r < packetInRounds; r++ {
				ip := freshExternalIP(b, fmt.Sprintf("172.18.0.%d", freshBase[node]+r))
				addr := net.JoinHostPort(ip, "19200")
				cold = append(cold, measureOnce(b, func() error { return dialFrom(from, addr) }))
				learn = append(learn, measureOnce(b, func() error { return waitMACBindingFlow(cl.Node(node), ip) }))
				warm = append(warm, measureOnce(b, func() error { return dialFrom(from, addr) }))
			}
			var svcs []time.Duration
			for r := 0; r < packetInRounds; r++ {
				svc := createService(b, newService(ns, fmt.Sprintf("svc-%s-%d", node, r), "web", svcPort("http", corev1.ProtocolTCP, 80, tcpPort)))
				start := time.Now()
				if err := untilConnects(from, net.JoinHostPort(svc.Spec.ClusterIP, "80")); err != nil {
					b.Fatal(err)
				}
				svcs = append(svcs, time.Since(start))
			}
			for _, f := range []struct {
				what string
				d    []time.Duration
			}{{"pod-ready", ready}, {"reject", refused}, {"arp-cold", cold}, {"arp-learn", learn}, {"arp-warm", warm}, {"service", svcs}} {
				p := benchutil.Percentiles(f.d, 50, 100)
				b.ReportMetric(float64(p[0].Microseconds())/1000, f.what+"-"+kind+"-p50-ms")
				b.Logf("%-6s %-9s %-9s p50 %8s  max %8s  (%d rounds)", kind, node, f.what, p[0].Round(10*time.Microsecond), p[1].Round(10*time.Microsecond), len(f.d))
			}
		}
	}
}

// measure times fn packetInRounds times.
func measure(b *testing.B, fn func() error) []time.Duration {
	b.Helper()
	var out []time.Duration
	for r := 0; r < packetInRounds; r++ {
		out = append(out, measureOnce(b, fn))
	}
	return out
}

func measureOnce(b *testing.B, fn func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// freshBase is where each node's fresh external addresses start (packetInRounds each, clear
// of the nodes', the external host's and the central host's).
var freshBase = map[string]int{"node1": 150, remoteNode: 170}

// freshExternalIP adds ip to the external host, which answers ARP for it, and returns it.
func freshExternalIP(b *testing.B, ip string) string {
	b.Helper()
	if out, err := cl.External.Exec(context.Background(), "ip", "addr", "add", ip+"/32", "dev", "eth0"); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	b.Cleanup(func() { cl.External.Exec(context.Background(), "ip", "addr", "del", ip+"/32", "dev", "eth0") })
	return ip
}

// dialFrom opens a TCP connection from netns to addr and closes it.
func dialFrom(netns, addr string) error {
	return harness.InNetns(netns, func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// waitMACBindingFlow waits until n's br-int has the flow of a MAC binding of ip (it matches
// the address in reg0 and carries the external host's MAC).
func waitMACBindingFlow(n *cluster.Node, ip string) error {
	v4 := net.ParseIP(ip).To4()
	match := fmt.Sprintf("reg0=0x%02x%02x%02x%02x", v4[0], v4[1], v4[2], v4[3])
	deadline := time.Now().Add(10 * time.Second)
	for {
		flows, err := n.OFCtl(context.Background(), "-O", "OpenFlow15", "dump-flows", "br-int", match)
		if err != nil {
			return err
		}
		if strings.Contains(flows, cl.External.MAC) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no MAC binding flow for %s on %s after 10s", ip, n.Name)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// untilConnects dials addr from netns every 10 ms (each attempt given 10 ms) until a
// connection is made, for at most 30 s.
func untilConnects(netns, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := harness.InNetns(netns, func() error {
			c, err := net.DialTimeout("tcp", addr, 10*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s from %s: %w", addr, netns, err)
		}
	}
}
