//go:build linux

package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/upstream"
)

// sets are the runs OVNT_UPSTREAM_SETS chooses from, by name: each a ginkgo focus.
var sets = map[string]string{
	"conformance": `\[sig-network\].*\[Conformance\]`,
	"netpol":      `\[Feature:NetworkPolicy\]`,
	"network":     `\[sig-network\]`,
}

// TestUpstream runs each chosen set (OVNT_UPSTREAM_SETS, comma-separated; default
// conformance) and fails for every upstream test that failed, or that the suite skipped at
// run time (a test that cannot apply belongs in the list, with its reason). The per-test
// table is written to <dir>/results.md, the JUnit report and ginkgo's log beside it, where
// dir is $OVNT_UPSTREAM_OUT/<set>, else <run>/upstream-<set>.
func TestUpstream(t *testing.T) {
	list, err := upstream.ParseList(upstream.NotApplicableFile)
	if err != nil {
		t.Fatalf("not-applicable.txt: %v", err)
	}
	list = upstream.ForCluster(list, len(cl.Nodes))
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
		defer cancel()
	}
	e2eDir, err := harness.EnsureE2EBinaries(ctx, harness.KubeVersion, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	kubeBin, err := harness.EnsureKubeBinaries(ctx, harness.KubeVersion, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	// The suite runs on the external host, outside the cluster, where an e2e runner sits:
	// it reaches the API server through a forwarder there and the nodes over the underlay.
	kubeconfig, err := cl.Kube.ExposeInNetns(cl.External.Netns)
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(envOr("OVNT_UPSTREAM_SETS", "conformance"), ",")
	var tally []*setTally
	for _, name := range names {
		focus, ok := sets[name]
		if !ok {
			t.Fatalf("OVNT_UPSTREAM_SETS: unknown set %q (conformance, netpol, network)", name)
		}
		if f := os.Getenv("OVNT_UPSTREAM_FOCUS"); f != "" {
			focus = f // one test, or a few, of the set (reproducing a failure)
		}
		t.Run(name, func(t *testing.T) {
			s := &setRun{name: name, focus: focus, list: list, e2eDir: e2eDir, kubectl: filepath.Join(kubeBin, "kubectl"),
				kubeconfig: kubeconfig, dir: run.Path("upstream-" + name)}
			if out := os.Getenv("OVNT_UPSTREAM_OUT"); out != "" {
				s.dir = filepath.Join(out, name) // kept after the run (make conformance-k8s)
			}
			tl := &setTally{name: name, dir: s.dir}
			tally = append(tally, tl)
			s.run(ctx, t, tl)
		})
	}
	report(t, tally)
	hold(ctx, t)
}

// hold keeps the cluster up after a failed run when OVNT_UPSTREAM_HOLD is set, until the file
// it names is removed (or the test's deadline): with it, the failed tests' namespaces stay
// too (--delete-namespace-on-failure=false), so their Services and pods can be inspected
// with kubectl, ovn-nbctl, ovs-appctl and ovn-trace against the run's sockets.
func hold(ctx context.Context, t *testing.T) {
	if os.Getenv("OVNT_UPSTREAM_HOLD") == "" || !t.Failed() {
		return
	}
	f := run.Path("hold")
	if err := os.WriteFile(f, []byte("remove this file to end the run\n"), 0o644); err != nil {
		t.Error(err)
		return
	}
	logf("upstream: holding the cluster for inspection: kubeconfig %s, sockets under %s; rm %s to end",
		cl.Kube.Kubeconfig, run.Dir, f)
	for {
		if _, err := os.Stat(f); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// setTally is what one set's run came to, for the summary at the end.
type setTally struct {
	name, dir                  string
	specs, pass, fail, na, not int
	elapsed                    time.Duration
	failing                    []string // "FAIL name" or "NOT RUN name"
	done                       bool     // false: the set stopped before its report was read
}

// report prints the per-set counts and the failing tests once all sets have run (make
// conformance-k8s shows it last), and writes it to summary.txt beside the sets' directories.
func report(t *testing.T, tally []*setTally) {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream e2e %s, summary:\n", harness.KubeVersion)
	for _, s := range tally {
		if !s.done {
			fmt.Fprintf(&b, "  %-11s did not finish: its errors are above (directory %s)\n", s.name, s.dir)
			continue
		}
		fmt.Fprintf(&b, "  %-11s %3d specs: %3d pass, %d fail, %3d not applicable, %d skipped or not run, in %s (report %s)\n",
			s.name, s.specs, s.pass, s.fail, s.na, s.not, s.elapsed.Round(time.Second), filepath.Join(s.dir, "junit.xml"))
		for _, f := range s.failing {
			fmt.Fprintf(&b, "    %s\n", f)
		}
	}
	logf("%s", b.String())
	if out := os.Getenv("OVNT_UPSTREAM_OUT"); out != "" {
		if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

type setRun struct {
	name, focus                      string
	list                             []upstream.Exclusion
	e2eDir, kubectl, kubeconfig, dir string
}

func (s *setRun) e2eArgs() []string {
	return []string{"--provider=local", "--kubeconfig=" + s.kubeconfig, "--kubectl-path=" + s.kubectl,
		"--report-dir=" + s.dir, "--dns-domain=cluster.local", "--num-nodes=" + strconv.Itoa(len(cl.Nodes)),
		"--delete-namespace-on-failure=" + strconv.FormatBool(os.Getenv("OVNT_UPSTREAM_HOLD") == "")}
}

func (s *setRun) run(ctx context.Context, t *testing.T, tally *setTally) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every spec of the set, from a dry run: what the list leaves out is reported as not
	// applicable, and a spec that neither ran nor is listed is an error.
	dry := filepath.Join(s.dir, "dry-run.xml")
	out, err := exec.CommandContext(ctx, filepath.Join(s.e2eDir, harness.E2ETestBinary), append([]string{
		"--ginkgo.dry-run", "--ginkgo.no-color", "--ginkgo.focus=" + s.focus, "--ginkgo.junit-report=" + dry}, s.e2eArgs()...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("e2e.test dry run: %v: %s", err, lastLines(string(out), 20))
	}
	all, err := upstream.ReadJUnit(dry)
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, r := range all {
		// The report names every spec of the suite; those the focus selected "passed".
		if r.Status == upstream.Passed && (strings.HasPrefix(r.Name, "[sig-") || strings.Contains(r.Name, "[Feature:")) {
			specs = append(specs, r.Name)
		}
	}
	if len(specs) == 0 {
		t.Fatalf("the dry run found no spec for focus %s", s.focus)
	}
	procs := envOr("OVNT_UPSTREAM_PROCS", "4")
	timeout, err := ginkgoTimeout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--procs=" + procs, "--focus=" + s.focus, "--no-color", "--silence-skips",
		"--output-dir=" + s.dir, "--junit-report=junit.xml", "--timeout=" + timeout.String()}
	if skip := upstream.SkipRegexp(s.list); skip != "" {
		args = append(args, "--skip="+skip)
	}
	args = append(args, filepath.Join(s.e2eDir, harness.E2ETestBinary), "--")
	args = append(args, s.e2eArgs()...)
	logPath := filepath.Join(s.dir, "ginkgo.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	start := time.Now()
	logf("upstream %s: %d specs in the set; running with %s procs, log %s", s.name, len(specs), procs, logPath)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", cl.External.Netns,
		filepath.Join(s.e2eDir, harness.GinkgoBinary)}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	runErr := cmd.Run()
	elapsed := time.Since(start)
	results, err := upstream.ReadJUnit(filepath.Join(s.dir, "junit.xml"))
	if err != nil {
		t.Fatalf("ginkgo: %v; no report: %v (log %s)", runErr, err, logPath)
	}
	byName := map[string]upstream.Result{}
	for _, r := range results {
		byName[r.Name] = r
		if strings.HasPrefix(r.Name, "[") && !strings.HasPrefix(r.Name, "[sig-") && r.Status == upstream.Failed {
			t.Errorf("%s failed: %s", r.Name, r.Message)
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| upstream test (%s) | result | time |\n|---|---|---|\n", s.name)
	var passed, failed, na, other int
	for _, name := range specs {
		tally.specs++
		if e := upstream.Excluded(s.list, name); e != nil {
			na++
			fmt.Fprintf(&table, "| %s | not applicable (not-applicable.txt line %d) | |\n", name, e.Line)
			continue
		}
		r, ok := byName[name]
		switch {
		case !ok:
			other++
			tally.failing = append(tally.failing, "NOT RUN "+name)
			t.Errorf("%s: did not run (ginkgo: %v)", name, runErr)
			fmt.Fprintf(&table, "| %s | did not run | |\n", name)
		case r.Status == upstream.Passed:
			passed++
			fmt.Fprintf(&table, "| %s | pass | %s |\n", name, r.Time.Round(time.Second))
		case r.Status == upstream.Failed:
			failed++
			tally.failing = append(tally.failing, "FAIL "+name)
			t.Errorf("FAIL %s (%s): %s", name, r.Time.Round(time.Second), firstLine(r.Message))
			fmt.Fprintf(&table, "| %s | **fail** | %s |\n", name, r.Time.Round(time.Second))
		default:
			other++
			tally.failing = append(tally.failing, strings.ToUpper(r.Status)+" "+name)
			t.Errorf("%s: %s at run time: %s (a test that cannot apply goes in not-applicable.txt, with why)", name, r.Status, firstLine(r.Message))
			fmt.Fprintf(&table, "| %s | %s | %s |\n", name, r.Status, r.Time.Round(time.Second))
		}
	}
	summary := fmt.Sprintf("upstream %s: %d specs: %d pass, %d fail, %d not applicable, %d skipped or not run; %s with %s procs",
		s.name, len(specs), passed, failed, na, other, elapsed.Round(time.Second), procs)
	fmt.Fprintf(&table, "\n%s\n", summary)
	os.WriteFile(filepath.Join(s.dir, "results.md"), []byte(table.String()), 0o644)
	logf("%s (table: %s)", summary, filepath.Join(s.dir, "results.md"))
	if runErr != nil && failed == 0 && other == 0 {
		t.Errorf("ginkgo: %v (log %s)", runErr, logPath)
	}
	tally.pass, tally.fail, tally.na, tally.not, tally.elapsed, tally.done = passed, failed, na, other, elapsed, true
}

// ginkgoTimeout is OVNT_UPSTREAM_TIMEOUT (default 3h), cut to end two minutes before ctx
// does: ginkgo stopped by its own timeout still writes the JUnit report (the specs it
// interrupted are failures), where one killed with the go test binary writes nothing.
func ginkgoTimeout(ctx context.Context) (time.Duration, error) {
	d, err := time.ParseDuration(envOr("OVNT_UPSTREAM_TIMEOUT", "3h"))
	if err != nil {
		return 0, fmt.Errorf("OVNT_UPSTREAM_TIMEOUT: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)-2*time.Minute < d {
		d = max(time.Until(dl)-2*time.Minute, time.Minute).Round(time.Second)
	}
	return d, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
