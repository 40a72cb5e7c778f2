//go:build linux

package probe_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// buildWorkload builds the real ovnt-workload binary, as the kubelet runs it.
func buildWorkload(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ovnt-workload")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/ovn-transparent/ovn-transparent/test/cmd/ovnt-workload").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ovnt-workload: %v\n%s", err, out)
	}
	return bin
}

// TestWorkloadAnswers runs the workload binary in one namespace and probes it from another
// over a veth: every protocol answers with the workload's name and the client's address.
// The server namespace has two addresses on one interface, and UDP and SCTP are probed on the
// secondary one: an answer from the primary address (the route's preferred source) would be
// dropped by the probe, so this checks the workload answers from the address asked.
func TestWorkloadAnswers(t *testing.T) {
	harness.Require(t, "ip", "go")
	bin := buildWorkload(t)
	r := harness.NewTestRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	srv, err := r.AddNetns("wsrv")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := r.AddNetns("wcli")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns   string
		args []string
	}{
		{"", []string{"link", "add", "wa", "netns", srv, "type", "veth", "peer", "name", "wb", "netns", cli}},
		{srv, []string{"addr", "add", "10.77.0.1/24", "dev", "wa"}},
		{srv, []string{"addr", "add", "10.77.0.11/24", "dev", "wa"}},
		{srv, []string{"link", "set", "wa", "up"}},
		{cli, []string{"addr", "add", "10.77.0.2/24", "dev", "wb"}},
		{cli, []string{"link", "set", "wb", "up"}},
	} {
		if _, err := harness.Exec(ctx, c.ns, "ip", c.args...); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	web := startWorkload(t, r, srv, bin, filepath.Join(dir, "web.ready"), "default/web", "--tcp", "8080", "--udp", "8081", "--sctp", "8082,8084")
	// A second workload in the same namespace, as two hostNetwork pods on one node: both see
	// every SCTP packet and must each answer only their own port.
	startWorkload(t, r, srv, bin, filepath.Join(dir, "other.ready"), "other/pod", "--sctp", "8083")

	client := netip.MustParseAddr("10.77.0.2")
	inClient := func(fn func(ctx context.Context) (string, error)) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var line string
		err := harness.InNetns(cli, func() error {
			var err error
			line, err = fn(ctx)
			return err
		})
		return line, err
	}
	for _, c := range []struct {
		what  string
		probe func(ctx context.Context) (string, error)
		want  string
	}{
		{"TCP", func(ctx context.Context) (string, error) { return probe.TCP(ctx, "10.77.0.1:8080") }, "default/web"},
		{"UDP secondary IP", func(ctx context.Context) (string, error) { return probe.UDP(ctx, "10.77.0.11:8081") }, "default/web"},
		{"SCTP secondary IP", func(ctx context.Context) (string, error) {
			return probe.SCTPInit(ctx, netip.MustParseAddr("10.77.0.11"), 8082)
		}, "default/web"},
		{"SCTP second port", func(ctx context.Context) (string, error) {
			return probe.SCTPInit(ctx, netip.MustParseAddr("10.77.0.1"), 8084)
		}, "default/web"},
		{"SCTP other workload", func(ctx context.Context) (string, error) {
			return probe.SCTPInit(ctx, netip.MustParseAddr("10.77.0.1"), 8083)
		}, "other/pod"},
	} {
		start := time.Now()
		line, err := inClient(c.probe)
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		name, ip, err := probe.ParseLine(line)
		if err != nil || name != c.want || ip != client {
			t.Errorf("%s: answer %q (%v), want %q from %s", c.what, line, err, c.want, client)
		}
		t.Logf("%s: %q in %s", c.what, line, time.Since(start).Round(time.Microsecond))
	}

	// Nobody serves these: TCP is refused at once, UDP gets a port unreachable, SCTP times out
	// (there is no kernel SCTP to answer with an ABORT).
	if _, err := inClient(func(ctx context.Context) (string, error) { return probe.TCP(ctx, "10.77.0.1:9999") }); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("TCP to a closed port: got %v, want connection refused", err)
	}
	if _, err := inClient(func(ctx context.Context) (string, error) { return probe.UDP(ctx, "10.77.0.1:9999") }); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("UDP to a closed port: got %v, want connection refused", err)
	}
	if _, err := inClient(func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		return probe.SCTPInit(ctx, netip.MustParseAddr("10.77.0.1"), 9999)
	}); err == nil {
		t.Error("SCTP INIT to a port nobody serves was answered")
	}

	// SIGTERM ends the workload with status 0.
	if err := web.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := web.Err(); err != nil {
		t.Errorf("workload exit after SIGTERM: %v", err)
	}
}

func startWorkload(t *testing.T, r *harness.Run, netns, bin, ready, name string, ports ...string) *harness.Proc {
	t.Helper()
	p, err := r.Start(harness.ProcSpec{
		Name:  "workload-" + strings.ReplaceAll(name, "/", "-"),
		Netns: netns,
		Path:  bin,
		Args:  append([]string{"--name", name, "--ready-file", ready}, ports...),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = poll.Until(ctx, name+" ready", 10*time.Millisecond, func() (bool, error) {
		select {
		case <-p.Done():
			return false, p.Err()
		default:
		}
		_, err := os.Stat(ready)
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
