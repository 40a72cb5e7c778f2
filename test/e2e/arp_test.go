//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestGatewayRoutersClaimNoOtherAddress: a gateway router speaks ARP on the physical network
// for its own address only. A NodePort Service with ClientIP affinity gives every gateway
// router the load balancer VIPs <node IP>:<nodePort> of every node, and its ClusterIP.
// OVN's defaults answer ARP requests for every VIP inside the router's subnet and announce
// every VIP with gratuitous ARP, so GR_node2 claimed node1's address: the nodes' tunnel
// neighbour caches then sent node1's GENEVE packets to node2's MAC, and pods on node1 were
// cut off from the node that learnt it for up to 15 minutes (seen in the upstream suite).
//
// The external host, on the underlay, records every ARP packet while the Service is made
// and asks for every node's address; each packet must come from the address's own node.
func TestGatewayRoutersClaimNoOtherAddress(t *testing.T) {
	ns := testNamespace(t)
	macOf := map[string]string{} // node IP -> its MAC
	for _, n := range cl.Nodes {
		macOf[n.IP] = strings.ToLower(n.MAC)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// -l: line-buffered; -e: the Ethernet source; only ARP.
	dump := exec.CommandContext(ctx, "ip", "netns", "exec", cl.External.Netns, "tcpdump", "-i", "eth0", "-l", "-n", "-e", "arp")
	out, err := dump.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	startPod(t, workloadPod(ns, "a", "node1", "web", corev1.ContainerPort{Name: "tcp", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}))
	s := newService(ns, "affinity", "web", svcPort("http", corev1.ProtocolTCP, 80, 8080))
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc := createService(t, s)
	np := nodePort(t, svc, "http")
	waitLBs(t, ns, "affinity", "every node's address as a VIP", func(rows []lbRow) bool {
		for _, r := range rows {
			if r.role != "lb-cluster" {
				continue
			}
			for ip := range macOf {
				if !strings.Contains(r.vips, fmt.Sprintf("%s:%d", ip, np)) {
					return false
				}
			}
			return true
		}
		return false
	})
	// Ask for every node's address, afresh, a few times; gratuitous ARPs of a change are
	// sent at once and then after 1, 2, 4, ... seconds.
	for range 3 {
		for ip := range macOf {
			if _, err := harness.Exec(ctx, cl.External.Netns, "ip", "neigh", "flush", "to", ip); err != nil {
				t.Fatal(err)
			}
			harness.Exec(ctx, cl.External.Netns, "ping", "-c", "1", "-W", "1", ip)
		}
		time.Sleep(time.Second)
	}
	cancel()
	dump.Wait()

	// "0a:58:ac:12:00:02 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: Request who-has 172.18.0.1 tell 172.18.0.2, length 28"
	// "0a:58:ac:12:00:01 > 0a:58:ac:12:00:64, ethertype ARP (0x0806), length 42: Reply 172.18.0.1 is-at 0a:58:ac:12:00:01, length 28"
	request := regexp.MustCompile(`^\S+ (\S+) > .*Request who-has \S+ tell ([0-9.]+)`)
	reply := regexp.MustCompile(`^\S+ (\S+) > .*Reply ([0-9.]+) is-at (\S+),`)
	services := netip.MustParsePrefix("10.96.0.0/16") // the test cluster's Service range
	var seen, replies int
	for l := range lines {
		seen++
		var src, ip, mac string
		if m := reply.FindStringSubmatch(l); m != nil {
			src, ip, mac = m[1], m[2], strings.ToLower(m[3])
			replies++
		} else if m := request.FindStringSubmatch(l); m != nil {
			src, ip, mac = m[1], m[2], strings.ToLower(m[1])
		} else {
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		switch want, isNode := macOf[ip]; {
		case services.Contains(addr) || addr == contract.NodePortGatewayIP:
			t.Errorf("a Service address announced by %s: %s", src, l)
		case isNode && mac != want:
			t.Errorf("%s claimed by %s (its node's MAC is %s): %s", ip, mac, want, l)
		}
	}
	if replies == 0 {
		t.Errorf("no ARP reply seen in %d ARP packets: the capture did not work", seen)
	}
	// And the external host, whose ARP entries were asked for afresh, reaches the NodePort on
	// every node.
	for _, n := range cl.Nodes {
		waitAnswer(t, cl.External.Netns, tcp, addrPort(n.IP, np), ns+"/a")
	}
}
