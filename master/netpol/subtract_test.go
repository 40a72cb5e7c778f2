package netpol

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
)

// subtractByHalves is the subtraction the master had until security audit 2 (finding 2): base
// whole when nothing of out overlaps it, nothing when one of out contains it, else its two
// halves, each less out. Quadratic, and obviously right: the oracle of subtract.
func subtractByHalves(base netip.Prefix, out []netip.Prefix) []netip.Prefix {
	overlaps := false
	for _, o := range out {
		if o.Overlaps(base) {
			if o.Bits() <= base.Bits() {
				return nil
			}
			overlaps = true
		}
	}
	if !overlaps {
		return []netip.Prefix{base}
	}
	lo := netip.PrefixFrom(base.Addr(), base.Bits()+1)
	hiAddr := base.Addr().AsSlice()
	bit := base.Bits()
	hiAddr[bit/8] |= 0x80 >> (bit % 8)
	hi, _ := netip.AddrFromSlice(hiAddr)
	return append(subtractByHalves(lo, out), subtractByHalves(netip.PrefixFrom(hi, base.Bits()+1), out)...)
}

// randomPrefix is a prefix of between minBits and maxBits bits at a random address near
// around: the first 32-span bits are around's, so that prefixes meet.
func randomPrefix(r *rand.Rand, around netip.Addr, span, minBits, maxBits int) netip.Prefix {
	b := around.AsSlice()
	n := len(b) * 8
	for i := n - span; i < n; i++ {
		if r.IntN(2) == 1 {
			b[i/8] ^= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, minBits+r.IntN(maxBits-minBits+1)).Masked()
}

// subtract gives exactly what the halving did, on random bases and excepts of both
// families: inside, around, containing and beside the base, nested and duplicated.
func TestSubtractMatchesHalving(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, fam := range []struct {
		around netip.Addr
		bits   int
	}{{netip.MustParseAddr("10.1.0.0"), 32}, {netip.MustParseAddr("fd00::"), 128}} {
		for i := range 3000 {
			base := randomPrefix(r, fam.around, 12, fam.bits-12, fam.bits-4)
			if i%50 == 0 {
				base = netip.PrefixFrom(fam.around, 0).Masked() // everything
			}
			var out []netip.Prefix
			for range r.IntN(12) {
				out = append(out, randomPrefix(r, fam.around, 12, fam.bits-14, fam.bits))
			}
			if len(out) > 0 && r.IntN(4) == 0 {
				out = append(out, out[r.IntN(len(out))]) // a duplicate
			}
			want := subtractByHalves(base, out)
			if got := subtract(base, out, 0); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s less %v:\n got %v\nwant %v", base, out, got, want)
			}
		}
	}
}

// Brute force on a /24: the prefixes subtract returns hold exactly the addresses of the
// base that no except holds, in address order, none of them joinable with the next.
func TestSubtractBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := netip.MustParsePrefix("192.0.2.0/24")
	for range 2000 {
		var out []netip.Prefix
		for range r.IntN(8) {
			out = append(out, randomPrefix(r, base.Addr(), 8, 24, 32))
		}
		got := subtract(base, out, 0)
		var covered []netip.Addr
		for i, p := range got {
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				covered = append(covered, a)
			}
			if i > 0 && !got[i-1].Addr().Less(p.Addr()) {
				t.Fatalf("%v: not in address order", got)
			}
			if parent := netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked(); p.Bits() > base.Bits() && len(subtract(parent, out, 0)) == 1 && subtract(parent, out, 0)[0] == parent {
				t.Fatalf("%v less %v: %s could be %s", base, out, p, parent)
			}
		}
		var want []netip.Addr
		for a := base.Addr(); base.Contains(a); a = a.Next() {
			excepted := false
			for _, o := range out {
				excepted = excepted || o.Contains(a)
			}
			if !excepted {
				want = append(want, a)
			}
		}
		if !reflect.DeepEqual(covered, want) {
			t.Fatalf("%s less %v: %v covers %d addresses, want %d", base, out, got, len(covered), len(want))
		}
	}
}
