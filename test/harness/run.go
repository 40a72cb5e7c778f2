//go:build linux

// Package harness starts a real cluster on one machine for tests and for the user's sandbox:
// Kubernetes control plane, OVN central, and OVN chassis in network namespaces.
//
// Everything one Run starts is named after the run's random ID, so two runs on one machine
// never collide, and everything is torn down on every exit path:
//
//   - Close, on success or failure (the test's deferred teardown);
//   - SIGINT/SIGTERM, through a handler that closes every live run before exiting;
//   - panic, SIGKILL or a go test timeout: every daemon is a direct child started with
//     PR_SET_PDEATHSIG, and a reaper process in its own session waits on a pipe that only the
//     test process holds; when that process dies the pipe closes and the reaper kills whatever
//     still carries the run's marker and deletes the run's network namespaces.
//
// NewRun also sweeps leftovers of earlier runs whose owner process is gone, in case even the
// reaper was killed.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Prefix starts the name of every network namespace and run directory a harness creates.
const Prefix = "ovnt-"

// keepLogsEnv, when set, keeps every run's logs, also of runs that passed.
const keepLogsEnv = "OVNT_KEEP_LOGS"

// markerEnv is set in the environment of every process a run starts; the reaper and the stale
// sweep find a run's processes by it, which is safe against PID reuse.
const markerEnv = "OVNT_HARNESS_RUN"

// Options configure a Run.
type Options struct {
	// Root is where the run directory is created. Default: $OVNT_TEST_ROOT, else /tmp.
	// Keep it short: unix socket paths are limited to 107 bytes.
	Root string
	// Logf receives progress lines; default discards them.
	Logf func(format string, args ...any)
	// KeepLogs keeps the log directory after a successful Close (always kept on failure).
	// OVNT_KEEP_LOGS=1 in the environment sets it for every run.
	KeepLogs bool
}

// Run is one harness instance: its directory, processes, namespaces and cleanups.
type Run struct {
	ID     string
	Dir    string // <root>/ovnt-<id>
	LogDir string // <Dir>/logs, kept when the run failed

	opts   Options
	reaper *os.File // write end of the pipe the reaper waits on

	mu        sync.Mutex
	procs     []*Proc
	netns     []string
	cleanups  []cleanup
	failed    bool
	closed    bool
	crashes   []string      // daemons that died on their own, in order (see noteCrash)
	closeDone chan struct{} // closed when the teardown Close started has finished
	ul        *underlay     // the nodes' shared L2, made by the first node or external host
	central   *OVNCentral   // set by StartOVNCentral
}

type cleanup struct {
	name string
	fn   func() error
}

// NewRun creates the run directory, sweeps stale runs and starts the reaper.
func NewRun(opts Options) (*Run, error) {
	if opts.Root == "" {
		opts.Root = os.Getenv("OVNT_TEST_ROOT")
	}
	if opts.Root == "" {
		opts.Root = "/tmp"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if os.Getenv(keepLogsEnv) != "" {
		opts.KeepLogs = true
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("harness: must run as root (network namespaces, OVS)")
	}
	// The OVN and OVS of OVNT_OVN; a rootfs that must be built first is built here, before
	// any deadline of the caller's starts.
	if err := UseSelectedOVN(context.Background(), opts.Logf); err != nil {
		return nil, err
	}
	if err := SweepStale(opts.Root, opts.Logf); err != nil {
		opts.Logf("harness: sweeping stale runs: %v", err)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b[:])
	r := &Run{ID: id, Dir: filepath.Join(opts.Root, Prefix+id), opts: opts}
	r.LogDir = filepath.Join(r.Dir, "logs")
	// The directory appears under its final name only with its owner file in it: another
	// process's SweepStale must never see a run directory without an owner and take it for
	// a dead run's.
	tmp, err := os.MkdirTemp(opts.Root, ".ovnt-new-")
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(tmp, "logs"), 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, r.Dir); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := r.startReaper(); err != nil {
		os.RemoveAll(r.Dir)
		return nil, fmt.Errorf("harness: starting reaper: %w", err)
	}
	register(r)
	opts.Logf("harness: run %s in %s", id, r.Dir)
	return r, nil
}

// Name returns a name unique to this run: "ovnt-<id>-<suffix>".
func (r *Run) Name(suffix string) string { return Prefix + r.ID + "-" + suffix }

// Path returns a path inside the run directory.
func (r *Run) Path(elem ...string) string { return filepath.Join(append([]string{r.Dir}, elem...)...) }

// Logf logs through the run's logger.
func (r *Run) Logf(format string, args ...any) { r.opts.Logf(format, args...) }

// Crashes lists the daemons of the run that died on their own so far (the harness restarted
// them), with what their logs said. A test that fails after one should be read with it in
// mind; a test can compare the count before and after a step.
func (r *Run) Crashes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.crashes)
}

// noteCrash records a daemon's death and says so as loudly as a log can.
func (r *Run) noteCrash(what string) {
	r.mu.Lock()
	r.crashes = append(r.crashes, what)
	r.mu.Unlock()
	r.Logf("!!!!!!!! harness: DAEMON CRASHED: %s", what)
}

// isClosed reports whether the run is being torn down.
func (r *Run) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// AddCleanup registers fn to run at Close, before the processes are stopped and the
// namespaces deleted; cleanups run in reverse order of registration.
func (r *Run) AddCleanup(name string, fn func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, cleanup{name, fn})
}

// MarkFailed makes Close print the daemons' logs and keep the log directory.
func (r *Run) MarkFailed() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}

// Close tears the run down: cleanups (LIFO), processes (reverse start order), network
// namespaces, then the run directory (logs are kept if the run failed or KeepLogs is set).
// It is idempotent, and a call made while another is tearing down waits for it to finish;
// it returns every error it met, joined.
func (r *Run) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		// Another goroutine (the signal handler, say) is tearing down: wait for it, or the
		// caller could exit the process halfway through.
		<-r.closeDone
		return nil
	}
	r.closed = true
	r.closeDone = make(chan struct{})
	cleanups, procs, nss, failed := r.cleanups, r.procs, r.netns, r.failed
	r.mu.Unlock()
	defer close(r.closeDone)
	defer unregister(r)

	var errs []error
	for i := len(cleanups) - 1; i >= 0; i-- {
		if err := cleanups[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", cleanups[i].name, err))
		}
	}
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	killMarked(r.ID)
	for i := len(nss) - 1; i >= 0; i-- {
		if err := deleteNetns(nss[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if failed {
		r.DumpLogs(os.Stderr)
	}
	if err := r.removeDir(failed || r.opts.KeepLogs); err != nil {
		errs = append(errs, err)
	}
	if r.reaper != nil {
		r.reaper.Close() // the reaper sweeps once more and exits
	}
	if failed || r.opts.KeepLogs {
		r.Logf("harness: logs of run %s kept in %s", r.ID, r.LogDir)
	}
	return errors.Join(errs...)
}

func (r *Run) removeDir(keepLogs bool) error {
	if !keepLogs {
		return os.RemoveAll(r.Dir)
	}
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(r.Dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// DumpLogs writes the last lines of every log file of the run to w.
func (r *Run) DumpLogs(w io.Writer) {
	files, _ := filepath.Glob(filepath.Join(r.LogDir, "*"))
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		const tail = 60
		if len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		fmt.Fprintf(w, "===== %s (last %d lines) =====\n%s\n", f, len(lines), strings.Join(lines, "\n"))
	}
}

// reaperScript runs in its own session. Its stdin is the read end of a pipe whose write end
// only the test process holds, so `cat` returns when that process exits however it exits.
// Then it kills every process of the run (inside the run's namespaces, or carrying the run's
// marker) and deletes the namespaces and everything in the run directory but the logs.
const reaperScript = `
cat >/dev/null 2>&1
id=$1; dir=$2
` + sweepShell

// sweepShell kills a run's processes and deletes its namespaces; $id and $dir are set. A
// real node's containers live in network namespaces containerd made and carry no marker:
// they are found by the cgroups their kubelet was given (/ovnt-<id>-<node>), and the mounts
// their pods left (volumes, root filesystems, namespaces) below the run directory.
const sweepShell = `
nss=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^ovnt-$id-")
for ns in $nss; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
for e in /proc/[0-9]*/environ; do
  if grep -qzx "OVNT_HARNESS_RUN=$id" "$e" 2>/dev/null; then p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; fi
done
cgs=$(ls -d /sys/fs/cgroup/*/ovnt-$id-* 2>/dev/null)
for cg in $cgs; do find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null; done
sleep 0.2
awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
for cg in $cgs; do find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null; done
for ns in $nss; do ip netns del "$ns" 2>/dev/null; done
if [ -d "$dir" ]; then find "$dir" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null; fi
true
`

func (r *Run) startReaper() error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "ovnt-reaper", r.ID, r.Dir)
	cmd.Stdin = pr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped only so it leaves no zombie while we live
	r.reaper = pw
	return nil
}

// SweepStale cleans up runs under root whose owner process no longer exists, and network
// namespaces of runs that have no directory any more. It is what the reaper would have done.
func SweepStale(root string, logf func(string, ...any)) error {
	ids := map[string]string{} // id -> dir ("" if no dir)
	dirs, _ := filepath.Glob(filepath.Join(root, Prefix+"*"))
	for _, d := range dirs {
		id := strings.TrimPrefix(filepath.Base(d), Prefix)
		if !isRunID(id) {
			continue
		}
		pid, err := readOwner(d)
		if err == nil && processAlive(pid) {
			continue
		}
		ids[id] = d
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(f[0], Prefix), "-")
		if !isRunID(id) {
			continue
		}
		if _, ok := ids[id]; ok {
			continue
		}
		d := filepath.Join(root, Prefix+id)
		if pid, err := readOwner(d); err == nil && processAlive(pid) {
			continue
		}
		if _, err := os.Stat(d); err != nil {
			// No directory: the run may belong to another root; only its owner knows. A run
			// with no directory anywhere we look and namespaces of ours is a leftover.
			if otherRootAlive(id) {
				continue
			}
			d = ""
		}
		ids[id] = d
	}
	var errs []error
	for id, d := range ids {
		logf("harness: sweeping stale run %s", id)
		cmd := exec.Command("/bin/sh", "-c", "id=$1; dir=$2\n"+sweepShell, "ovnt-sweep", id, d)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %v: %s", id, err, out))
		}
		if d != "" {
			os.RemoveAll(filepath.Join(d, "logs"))
			os.Remove(d)
		}
	}
	return errors.Join(errs...)
}

// otherRootAlive reports whether some live process carries the marker of run id.
func otherRootAlive(id string) bool {
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	want := []byte(markerEnv + "=" + id + "\x00")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(data), string(want)) {
			return true
		}
	}
	return false
}

func isRunID(s string) bool {
	if len(s) != 6 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func readOwner(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killMarked SIGKILLs every process that still carries run id's marker (a daemon's own
// children, or one that ignored its stop signal).
func killMarked(id string) {
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	want := markerEnv + "=" + id + "\x00"
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), want) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f, "/proc/"), "/environ"))
		if err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// The signal handler must find every live run of the process; this registry exists only for
// it (a run is registered by NewRun and removed by Close).
var (
	liveMu   sync.Mutex
	liveRuns = map[*Run]struct{}{}
	sigOnce  sync.Once
)

func register(r *Run) {
	liveMu.Lock()
	liveRuns[r] = struct{}{}
	liveMu.Unlock()
	sigOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			s := <-ch
			fmt.Fprintf(os.Stderr, "harness: %v: tearing down\n", s)
			liveMu.Lock()
			runs := make([]*Run, 0, len(liveRuns))
			for r := range liveRuns {
				runs = append(runs, r)
			}
			liveMu.Unlock()
			for _, r := range runs {
				r.Close()
			}
			os.Exit(130)
		}()
	})
}

func unregister(r *Run) {
	liveMu.Lock()
	delete(liveRuns, r)
	liveMu.Unlock()
}
