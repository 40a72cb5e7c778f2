package probe

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
)

// The expected bytes were computed by an independent bit-by-bit CRC32c (polynomial
// 0x82F63B78) over the same fields: they pin the field layout and the checksum's byte order,
// which a round trip through our own parser could not catch.
func TestSCTPInitBytes(t *testing.T) {
	got := sctpInit{SrcPort: 5000, DstPort: 80, Type: chunkInit, InitiateTag: 0x01020304, InitialTSN: 0x0a0b0c0d}.marshal()
	want, _ := hex.DecodeString("13880050000000003a937a4201000014010203040000ffff000100010a0b0c0d")
	if !bytes.Equal(got, want) {
		t.Fatalf("INIT\n got %x\nwant %x", got, want)
	}
}

func TestSCTPInitAckRoundTrip(t *testing.T) {
	for _, cookie := range []string{"default/web 10.0.0.1", "ns/p 1.2.3.4", "x"} { // lengths 20, 13, 1: every padding
		in := sctpInit{SrcPort: 80, DstPort: 5000, VerificationTag: 0x01020304, Type: chunkInitAck,
			InitiateTag: 7, InitialTSN: 9, Cookie: []byte(cookie)}
		b := in.marshal()
		if len(b)%4 != 0 {
			t.Errorf("cookie %q: packet of %d bytes is not padded to 4", cookie, len(b))
		}
		out, err := parseSCTPInit(b)
		if err != nil {
			t.Fatalf("cookie %q: %v", cookie, err)
		}
		if out.SrcPort != 80 || out.DstPort != 5000 || out.VerificationTag != 0x01020304 || out.Type != chunkInitAck ||
			out.InitiateTag != 7 || out.InitialTSN != 9 || string(out.Cookie) != cookie {
			t.Errorf("round trip: got %+v, want %+v", out, in)
		}
		b[len(b)-1] ^= 0xff
		if _, err := parseSCTPInit(b); err == nil {
			t.Errorf("cookie %q: corrupted packet accepted", cookie)
		}
	}
}

func TestParseSCTPRejects(t *testing.T) {
	abort := []byte{0, 80, 0x13, 0x88, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0, 4}
	setChecksum(abort)
	if _, err := parseSCTPInit(abort); err != errNotInit {
		t.Errorf("ABORT: got %v, want errNotInit", err)
	}
	short := sctpInit{Type: chunkInit, InitiateTag: 1}.marshal()[:20]
	setChecksum(short)
	if _, err := parseSCTPInit(short); err == nil {
		t.Error("truncated INIT accepted")
	}
}

func TestIPv4Packet(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	payload := []byte("payload")
	pkt := append(ipv4Header(src, dst, protoSCTP, len(payload)), payload...)
	pkt = append(pkt, 0, 0) // trailing bytes beyond the total length are not payload
	s, d, proto, p, err := ipv4Packet(pkt)
	if err != nil || s != src || d != dst || proto != protoSCTP || string(p) != "payload" {
		t.Fatalf("got %s %s %d %q %v", s, d, proto, p, err)
	}
}

func TestParseLine(t *testing.T) {
	name, ip, err := ParseLine(Line("default/web", netip.MustParseAddr("::ffff:10.1.2.3")) + "\n")
	if err != nil || name != "default/web" || ip != netip.MustParseAddr("10.1.2.3") {
		t.Fatalf("got %q %s %v", name, ip, err)
	}
	if _, _, err := ParseLine("garbage"); err == nil {
		t.Error("garbage accepted")
	}
}
