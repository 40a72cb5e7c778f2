package conformance

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/generator"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// One cluster (node1, and node2 as a remote chassis) per test binary, started by the first test that needs it and
// shared by all: cyclonus' namespaces x, y, z and the e2e tests' own namespaces.
var shared struct {
	once sync.Once
	run  *harness.Run
	cl   *cluster.Cluster
	r    *runner
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.run != nil {
		if code != 0 {
			dumpOVN()
			shared.run.MarkFailed()
		}
		if err := shared.run.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: teardown:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

var logf = cluster.Logf

// sharedRunner starts the cluster and cyclonus' pods once.
func sharedRunner(t *testing.T) *runner {
	t.Helper()
	testenv.Integration(t)
	if missing := harness.Missing("ovsdb-server", "ovs-vswitchd", "ovn-controller", "ovn-northd", "etcd", "ip",
		"containerd", "runc", "ctr", "nsenter", "busybox", "/usr/lib/cni/loopback"); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("prerequisites missing on CI: %v", missing)
		}
		t.Skipf("prerequisites missing: %v (run make test as root)", missing)
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		shared.run, shared.err = harness.NewRun(harness.Options{Logf: logf})
		if shared.err != nil {
			return
		}
		start := time.Now()
		// OVNT_CONFORMANCE_WINDOWS=1 labels node2 kubernetes.io/os=windows: the policies
		// live in OVN, so its pods must be judged exactly like node1's.
		// Real kubelets label their nodes themselves: the Windows variant keeps the
		// kubelet stand-in, which labels node2 as it is told.
		// node2 is a remote chassis (docs/remote-chassis.md): its ovn-controller runs on a
		// controller host of its own and programs its br-int over TLS, as a Windows node's
		// does; every case is judged across a local-mode node and a remote one.
		opts := cluster.Options{RealNodes: true, RemoteNodes: map[string]bool{"node2": true}}
		if os.Getenv("OVNT_CONFORMANCE_WINDOWS") == "1" {
			opts = cluster.Options{WindowsNodes: map[string]bool{"node2": true}}
		}
		shared.cl, shared.err = cluster.Start(ctx, shared.run, opts)
		if shared.err != nil {
			return
		}
		shared.r = newRunner(shared.cl, logf)
		shared.err = shared.r.setup(ctx)
		logf("conformance: cluster and cyclonus' 9 pods up in %s", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.r
}

// dumpOVN prints the NetworkPolicy rows an operator would look at first.
func dumpOVN() {
	if shared.cl == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range [][]string{
		{"--columns=name,ports,acls,external_ids", "list", "Port_Group"},
		{"--columns=name,addresses,external_ids", "list", "Address_Set"},
		{"--columns=name,direction,priority,match,action,options", "list", "ACL"},
	} {
		out, err := shared.cl.Central.NBCtl(ctx, q...)
		fmt.Fprintf(os.Stderr, "===== ovn-nbctl %v (err %v)\n%s\n", q, err, out)
	}
}

// TestNoPolicyAllAllowed: before any policy, every pod reaches every other pod on every
// port and protocol (what every case's expectations are measured against).
func TestNoPolicyAllAllowed(t *testing.T) {
	r := sharedRunner(t)
	tc := generator.NewTestCase("ovnt: no policies", generator.NewStringSet(generator.TagAllowAll), generator.NewTestStep(generator.ProbeAllAvailable))
	res := r.runCase(t.Context(), -1, tc, func(s string) { t.Error(s) })
	t.Logf("%d probes in %.1f s", res.Probes, res.Seconds)
	if res.Probes != 9*8*len(ports)*len(protocols) {
		t.Errorf("%d probes, want %d", res.Probes, 9*8*len(ports)*len(protocols))
	}
}

// TestCyclonus runs cyclonus' generated cases (plus ours, see notInCases) against the cluster
// and compares every probe with the oracle. By default the CI subset (every tag at least
// once); OVNT_CONFORMANCE=all runs every case; OVNT_CONFORMANCE=3,17 runs those cases.
func TestCyclonus(t *testing.T) {
	r := sharedRunner(t)
	zc, err := r.base.GetPod("z", "c")
	if err != nil {
		t.Fatal(err)
	}
	cases := allCases(zc.IP)
	var pick []int
	switch sel := os.Getenv("OVNT_CONFORMANCE"); sel {
	case "", "ci":
		pick = ciSubset(cases)
	case "all":
		for i := range cases {
			pick = append(pick, i)
		}
	default:
		for _, f := range strings.Split(sel, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 || i >= len(cases) {
				t.Fatalf("OVNT_CONFORMANCE=%q: %q is not a case number (0..%d)", sel, f, len(cases)-1)
			}
			pick = append(pick, i)
		}
	}
	logf("conformance: running %d of %d cases", len(pick), len(cases))
	var results []caseResult
	for _, i := range pick {
		tc := cases[i]
		res := runCaseOnce(t, r, i, tc)
		logf("conformance: case #%d %q [%s]: passed=%v, %d probes, %d differ, %d NotIn-corrected, %d agreed on retry, %d stale datapath flows, %.1f s",
			i, tc.Description, strings.Join(tc.Tags.Keys(), ","), res.Passed, res.Probes, res.Mismatches, res.Corrected, res.Retried, res.StaleDatapath, res.Seconds)
		results = append(results, res)
	}
	s := summary(results)
	fmt.Println(s)
	t.Log("\n" + s)
}

// runCaseOnce runs case i and reports its failures, unless a daemon of the run crashed
// while it ran (the harness restarts it; see harness.Run.Crashes): then the case's result
// says nothing about ovn-transparent, and the case runs once more from its base state, the
// discarded failures logged next to the crash.
func runCaseOnce(t *testing.T, r *runner, i int, tc *generator.TestCase) caseResult {
	for attempt := 1; ; attempt++ {
		before := len(shared.run.Crashes())
		var failures []string
		res := r.runCase(t.Context(), i, tc, func(s string) { failures = append(failures, s) })
		crashes := shared.run.Crashes()[before:]
		if len(crashes) == 0 || attempt == 2 {
			for _, f := range failures {
				t.Error(f)
			}
			for _, n := range res.Notes {
				t.Log(n)
			}
			if len(crashes) > 0 {
				t.Errorf("case #%d: a daemon crashed during both runs of the case: %q", i, crashes)
			}
			return res
		}
		logf("conformance: case #%d ran while a daemon crashed (%q); its %d failures are discarded and it runs again:\n%s",
			i, crashes, len(failures), strings.Join(failures, "\n"))
	}
}
