package netpol

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// exceptsPolicy admits ingress from everywhere except n addresses spread over the IPv4
// space: the policy of security audit 2, finding 2 (5,000 excepts: ~97,000 prefixes).
func exceptsPolicy(n int) *networkingv1.NetworkPolicy {
	except := make([]string, n)
	for i := range except {
		v := uint32(i+1) * 2654435761 // spread, distinct for n < 2^32
		except[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String() + "/32"
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "excepts"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except}}}}}}}
}

// The prefixes an ipBlock becomes count in Input.MaxSize: the audit's policy of 5,000
// excepts is refused at the default limit, failing closed, and the error says the size;
// a few excepts pass. Before, it was written whole: one ACL of ~97,000 prefixes.
func TestMaxSizeCountsIPBlockPrefixes(t *testing.T) {
	in := Input{Policy: exceptsPolicy(5000), Pods: []Pod{pod("a", "10.244.1.3", nil)}, MaxSize: DefaultMaxSize}
	out, err := Translate(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("exceed the limit of %d per policy", DefaultMaxSize)) {
		t.Fatalf("5,000 excepts: error %v", err)
	}
	if a := acls(t, out); len(a) != 1 || a["ingress-deny"] == nil {
		t.Errorf("not failed closed: ACLs %v", a)
	}
	// It stops after the gap between two excepts that passes the limit: at most 62 prefixes.
	if out.Size <= DefaultMaxSize || out.Size > DefaultMaxSize+62 {
		t.Errorf("size %d: the translation did not stop soon after the limit of %d", out.Size, DefaultMaxSize)
	}

	in.Policy = exceptsPolicy(10)
	out, err = Translate(context.Background(), in)
	if err != nil {
		t.Fatalf("10 excepts: %v", err)
	}
	// The ingress deny, the management allow (none here) and the rule: 2 ACLs; the
	// everything-but-10-addresses prefixes (31 per address, less the shared ones).
	if n := strings.Count(acls(t, out)["ingress-0"].Match, "/"); out.Size != 2+n || n < 200 {
		t.Errorf("10 excepts: size %d, %d prefixes in the rule", out.Size, n)
	}
	in.MaxSize = out.Size - 1
	if _, err := Translate(context.Background(), in); err == nil {
		t.Errorf("size %d passed a limit of %d", out.Size, in.MaxSize)
	}
}

// A translation whose context has ended stops with a *ReadError and no rows, like one that
// could not read its pods: the caller retries; it never applies a half policy.
func TestTranslateStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := Translate(ctx, Input{Policy: exceptsPolicy(100), Pods: []Pod{pod("a", "10.244.1.3", nil)}})
	if _, unread := errors.AsType[*ReadError](err); !unread || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want a *ReadError wrapping context.Canceled", err)
	}
	if out.Rows != nil || out.Peers != nil {
		t.Errorf("rows after the context ended: %+v", out)
	}
}

// BenchmarkExcepts times the audit's policy: the subtraction alone (sorted sweep, and the
// halving it replaced: -bench 'Excepts/.*/halving' -benchtime 1x, it takes a minute), and
// Translate with no limit (every prefix written out) and at the default limit (refused).
func BenchmarkExcepts(b *testing.B) {
	for _, n := range []int{5000, 10000} {
		pol := exceptsPolicy(n)
		base := netip.MustParsePrefix("0.0.0.0/0")
		var except []netip.Prefix
		for _, e := range pol.Spec.Ingress[0].From[0].IPBlock.Except {
			except = append(except, netip.MustParsePrefix(e))
		}
		b.Run(fmt.Sprintf("%d/sorted", n), func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(float64(len(subtract(base, except, 0))), "prefixes")
			}
		})
		b.Run(fmt.Sprintf("%d/halving", n), func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(float64(len(subtractByHalves(base, except))), "prefixes")
			}
		})
		for _, limit := range []int{0, DefaultMaxSize} {
			b.Run(fmt.Sprintf("%d/translate-limit-%d", n, limit), func(b *testing.B) {
				in := Input{Policy: pol, Pods: []Pod{pod("a", "10.244.1.3", nil)}, MaxSize: limit}
				for b.Loop() {
					out, _ := Translate(context.Background(), in)
					b.ReportMetric(float64(out.Size), "size")
				}
			})
		}
	}
}
