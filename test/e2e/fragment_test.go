//go:build linux

package e2e

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// fragmentedSize is a UDP payload that a pod's interface (MTU 1,500 at most) sends as three
// IPv4 fragments: the size of the upstream [sig-network] tests' large requests.
const fragmentedSize = 3001

// TestServiceUDPFragmented: new UDP flows whose first datagram is fragmented reach the
// backends of a ClusterIP on both nodes, from pods on both nodes, and are answered. OVN
// 23.03 with OVS 3.1 (Debian 12) lose every such flow (docs/upstream-e2e.md; fixed in OVN
// 25.09 with the fragment fixes of OVS 3.5.1 and 4.0), so the test runs on the pinned OVN
// (OVNT_OVN=26.03) only, or with OVNT_FRAGMENTS=1 on any (to see the old edge fail).
func TestServiceUDPFragmented(t *testing.T) {
	if sel, err := harness.OVNSelected(); (err != nil || !sel) && os.Getenv("OVNT_FRAGMENTS") != "1" {
		t.Skipf("OVN 23.03 / OVS 3.1 lose UDP fragments through a load balancer; OVNT_OVN=%s runs this test (%v)", harness.OVNRootfsRelease, err)
	}
	ns := testNamespace(t)
	_, _, client1, client2 := twoBackends(t, ns)
	svc := createService(t, newService(ns, "big", "web", svcPort("dns", corev1.ProtocolUDP, 53, 9090)))
	vip := addrPort(svc.Spec.ClusterIP, 53)
	// Small datagrams first: the Service works before its large requests are judged.
	waitAnswer(t, podNetns(t, client1), udp, vip)
	for _, client := range []*corev1.Pod{client1, client2} {
		from := podNetns(t, client)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		seen := map[string]int{}
		flows, lost := 0, 0
		var lastErr error
		for len(seen) < 2 && ctx.Err() == nil {
			flows++
			line, err := bigUDP(ctx, from, vip, fragmentedSize)
			if err != nil {
				lost++
				lastErr = err
				continue
			}
			name, _, err := probe.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			seen[name]++
		}
		cancel()
		t.Logf("from %s: %d new flows of %d-byte datagrams, %d lost, answered by %v", client.Name, flows, fragmentedSize, lost, seen)
		if seen[ns+"/a"] == 0 || seen[ns+"/c"] == 0 {
			t.Errorf("from %s: fragmented UDP to %s answered by %v, want both backends (%d flows, %d lost; last error: %v)",
				client.Name, vip, seen, flows, lost, lastErr)
		}
	}
}

// bigUDP sends one datagram of size bytes from a new socket in netns (a new flow) to addr
// and returns the answer, or an error after a second without one.
func bigUDP(ctx context.Context, netns string, addr netip.AddrPort, size int) (string, error) {
	var answer string
	err := harness.InNetns(netns, func() error {
		c, err := net.Dial("udp", addr.String())
		if err != nil {
			return err
		}
		defer c.Close()
		payload := []byte(strings.Repeat("x", size-1) + "\n")
		if _, err := c.Write(payload); err != nil {
			return err
		}
		wait := time.Now().Add(time.Second)
		if dl, ok := ctx.Deadline(); ok && dl.Before(wait) {
			wait = dl
		}
		c.SetReadDeadline(wait)
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errors.New("no answer in a second")
		}
		if err != nil {
			return err
		}
		answer = strings.TrimSuffix(string(buf[:n]), "\n")
		return nil
	})
	return answer, err
}
