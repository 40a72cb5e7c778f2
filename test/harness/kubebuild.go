//go:build linux

package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// KubeVersion is the Kubernetes release the harness builds and runs. It must match the
// k8s.io/client-go the project pins (v0.34.x): the module proxy serves the staging modules
// the controller-manager and scheduler need only for releases that recent.
const KubeVersion = "v1.34.4"

// kubePackages are the packages of k8s.io/kubernetes EnsureKubeBinaries builds, each into a
// binary named after its last element: the control plane, kubelet for the nodes, kubectl for
// the people using the sandbox, and agnhost, the upstream e2e tests' workload, which the
// image builder packages as registry.k8s.io/e2e-test-images/agnhost.
var kubePackages = []string{
	"cmd/kube-apiserver", "cmd/kube-controller-manager", "cmd/kube-scheduler", "cmd/kubectl",
	"cmd/kubelet", "test/images/agnhost",
}

// kubeCommands are the binaries' names.
var kubeCommands = func() []string {
	var names []string
	for _, p := range kubePackages {
		names = append(names, filepath.Base(p))
	}
	return names
}()

// stampName marks a complete bin directory. It is written last into the temporary directory
// that is then renamed into place, so a bin directory with a stamp is always whole.
const stampName = ".ovnt-build-stamp"

var kubeVersionRE = regexp.MustCompile(`^v1\.([0-9]+)\.([0-9]+)$`)

// KubeCacheDir is the root of the harness's build cache: $OVNT_CACHE_DIR, else
// /var/cache/ovn-transparent. It lives outside the repository so `git clean` and fresh
// checkouts do not cost another 5-8 minute build.
func KubeCacheDir() string {
	if d := os.Getenv("OVNT_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/ovn-transparent"
}

// EnsureKubeBinaries returns the directory holding kube-apiserver, kube-controller-manager and
// kube-scheduler of the given release ("v1.34.4"), building them from the Go module proxy the
// first time: <cache>/kube/<version>/bin. It is safe to call from many processes at once (go
// test runs packages in parallel): an exclusive flock on <cache>/kube/<version>.lock lets one
// build while the others wait, and the others then find the finished binaries. A build that
// fails or is cancelled leaves nothing in bin/. The build uses the caller's Go, module cache
// and build cache.
func EnsureKubeBinaries(ctx context.Context, version string, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	m := kubeVersionRE.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("kube build: version %q is not of the form v1.X.Y", version)
	}
	kubeDir := filepath.Join(KubeCacheDir(), "kube")
	verDir := filepath.Join(kubeDir, version)
	binDir := filepath.Join(verDir, "bin")
	if kubeBinariesComplete(binDir, version) {
		return binDir, nil
	}
	if err := os.MkdirAll(kubeDir, 0o755); err != nil {
		return "", fmt.Errorf("kube build: %w (set OVNT_CACHE_DIR to a writable directory)", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(kubeDir, version+".lock"), logf)
	if err != nil {
		return "", fmt.Errorf("kube build: %w", err)
	}
	defer unlock()
	// Whoever held the lock before us may have just finished the build.
	if kubeBinariesComplete(binDir, version) {
		return binDir, nil
	}
	start := time.Now()
	logf("kube build: building %s into %s, once: about 30 minutes on 2 cores when the Go caches are cold", version, binDir)
	b := &kubeBuild{version: version, minor: m[1], verDir: verDir, logf: logf}
	if err := b.run(ctx); err != nil {
		return "", fmt.Errorf("kube build %s: %w (log: %s)", version, err, b.logPath())
	}
	logf("kube build: %s done in %s", version, time.Since(start).Round(time.Second))
	return binDir, nil
}

// kubeBinariesComplete reports whether binDir holds a finished build of version.
func kubeBinariesComplete(binDir, version string) bool {
	stamp, err := os.ReadFile(filepath.Join(binDir, stampName))
	if err != nil || !strings.HasPrefix(string(stamp), "k8s.io/kubernetes "+version+"\n") {
		return false
	}
	for _, c := range kubeCommands {
		fi, err := os.Stat(filepath.Join(binDir, c))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel the wait (a
// blocking flock cannot be interrupted). The lock file itself is never deleted: removing it
// while another process waits on the old inode would let two builds run at once.
func lockFile(ctx context.Context, path string, logf func(string, ...any)) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	logged := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if !logged {
			logf("kube build: waiting for another process building into the same cache (%s)", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// kubeBuild is one build of the three binaries in a throwaway module under verDir/src.
type kubeBuild struct {
	version string // v1.34.4
	minor   string // 34
	verDir  string
	logf    func(string, ...any)
	goBin   string
	env     []string
	// tools are the packages the module records (default kubePackages, prefixed with
	// k8s.io/kubernetes/); e2ebuild.go sets its own.
	tools []string
}

func (b *kubeBuild) srcDir() string  { return filepath.Join(b.verDir, "src") }
func (b *kubeBuild) logPath() string { return filepath.Join(b.verDir, "build.log") }

// stagingVersion maps a Kubernetes release to the version its staging modules (k8s.io/api,
// k8s.io/apiserver, ...) are published under: v1.34.4 -> v0.34.4.
func (b *kubeBuild) stagingVersion() string { return "v0" + strings.TrimPrefix(b.version, "v1") }

func (b *kubeBuild) run(ctx context.Context) error {
	if err := b.setUp(ctx); err != nil {
		return err
	}
	return b.buildInto(ctx, filepath.Join(b.verDir, "bin"))
}

// setUp finds the go command, empties the module directory and the log, and prepares the
// module.
func (b *kubeBuild) setUp(ctx context.Context) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build Kubernetes: %w", err)
	}
	b.goBin = goBin
	b.env = kubeBuildEnv(os.Environ())
	if err := os.RemoveAll(b.srcDir()); err != nil {
		return err
	}
	if err := os.MkdirAll(b.srcDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(b.logPath(), nil, 0o644); err != nil {
		return err
	}
	return b.prepareModule(ctx)
}

// kubeBuildEnv is the caller's environment (so the normal GOMODCACHE, GOCACHE, GOPROXY and
// GOFLAGS apply) adjusted for a standalone module built for this machine.
func kubeBuildEnv(environ []string) []string {
	var env []string
	goflags := []string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS":
			// Keep the caller's flags (e.g. -buildvcs=false) but not a -mod=vendor or
			// -mod=readonly meant for the project: the throwaway module has no vendor
			// directory and go build may need to add a go.sum line tidy -e left out.
			for _, f := range strings.Fields(v) {
				if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
					goflags = append(goflags, f)
				}
			}
		case "GOWORK", "GOOS", "GOARCH", "CGO_ENABLED", "GO111MODULE":
			// A workspace would pull the throwaway module into the caller's; a cross
			// GOOS/GOARCH would build binaries this machine cannot run.
		default:
			env = append(env, kv)
		}
	}
	goflags = append(goflags, "-mod=mod")
	return append(env,
		"GOFLAGS="+strings.Join(goflags, " "),
		"GOWORK=off",
		"GO111MODULE=on",
		"GOOS="+runtime.GOOS,
		"GOARCH="+runtime.GOARCH,
		// Static binaries: no dependency on the C toolchain or the libc of the machine.
		"CGO_ENABLED=0",
	)
}

// prepareModule writes a module that requires k8s.io/kubernetes and imports its three cmds.
// k8s.io/kubernetes requires its staging modules at v0.0.0 and points them at ./staging with
// replace directives, which Go ignores outside the main module; the throwaway module
// re-states each of those replaces with the version the proxy publishes.
func (b *kubeBuild) prepareModule(ctx context.Context) error {
	if _, err := b.goCmd(ctx, "go mod init", "mod", "init", "ovnt-kube-build"); err != nil {
		return err
	}
	b.logf("kube build: downloading k8s.io/kubernetes@%s", b.version)
	out, err := b.goCmd(ctx, "go mod download", "mod", "download", "-json", "k8s.io/kubernetes@"+b.version)
	if err != nil {
		return err
	}
	var dl struct {
		GoMod string
		Error string
	}
	if err := json.Unmarshal(out, &dl); err != nil {
		return fmt.Errorf("go mod download: decoding %q: %w", out, err)
	}
	if dl.Error != "" || dl.GoMod == "" {
		return fmt.Errorf("go mod download k8s.io/kubernetes@%s: %s", b.version, dl.Error)
	}
	gomod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	staging := stagingModules(gomod)
	if len(staging) == 0 {
		return fmt.Errorf("no ./staging replace directives in %s", dl.GoMod)
	}
	args := []string{"mod", "edit", "-require=k8s.io/kubernetes@" + b.version}
	for _, mod := range staging {
		args = append(args, "-replace="+mod+"="+mod+"@"+b.stagingVersion())
	}
	if _, err := b.goCmd(ctx, "go mod edit", args...); err != nil {
		return err
	}
	// The build tag keeps the file out of every build while go mod tidy, which considers all
	// tags, still records the modules the three commands need.
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\n// Package tools only records the Kubernetes commands this module builds.\npackage tools\n\nimport (\n")
	for _, p := range b.toolPackages() {
		fmt.Fprintf(&tools, "\t_ %q\n", p)
	}
	tools.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(b.srcDir(), "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return err
	}
	b.logf("kube build: resolving %d staging modules at %s (go mod tidy)", len(staging), b.stagingVersion())
	// -e: tests of a few dependencies import modules the proxy refuses; the commands do not
	// need them, and without -e tidy fails on them.
	_, err = b.goCmd(ctx, "go mod tidy", "mod", "tidy", "-e")
	return err
}

func (b *kubeBuild) toolPackages() []string {
	if b.tools != nil {
		return b.tools
	}
	var pkgs []string
	for _, p := range kubePackages {
		pkgs = append(pkgs, "k8s.io/kubernetes/"+p)
	}
	return pkgs
}

// stagingModules returns the module paths a k8s.io/kubernetes go.mod replaces with ./staging.
func stagingModules(gomod []byte) []string {
	re := regexp.MustCompile(`^\s*(?:replace\s+)?([A-Za-z0-9./_-]+)\s+=>\s+\./staging/`)
	var mods []string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			mods = append(mods, m[1])
		}
	}
	return mods
}

// buildInto compiles the three commands into a temporary directory beside binDir and renames
// it into place, so readers never see a half-written binary.
func (b *kubeBuild) buildInto(ctx context.Context, binDir string) error {
	tmp, err := os.MkdirTemp(b.verDir, "bin-tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	args := []string{"build", "-v", "-trimpath", "-ldflags=" + b.ldflags(), "-o", tmp + string(filepath.Separator)}
	var pkgs []string
	for _, p := range kubePackages {
		pkgs = append(pkgs, "k8s.io/kubernetes/"+p)
	}
	args = append(args, pkgs...)
	_, stale, err := b.staleDeps(ctx, false, []string{"-trimpath"}, pkgs...)
	if err != nil {
		return err
	}
	b.logf("kube build: compiling %s: %d packages (the long part; progress every %s)",
		strings.Join(kubeCommands, ", "), stale, progressEvery)
	start := time.Now()
	if _, err := b.goCmdProgress(ctx, "kube build", &packageCounter{Total: stale}, args...); err != nil {
		return err
	}
	b.logf("kube build: compiled in %s", time.Since(start).Round(time.Second))
	out, err := exec.CommandContext(ctx, filepath.Join(tmp, "kube-apiserver"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), b.version) {
		return fmt.Errorf("built kube-apiserver --version: %v: %q", err, out)
	}
	goVersion, _ := b.goCmd(ctx, "go env", "env", "GOVERSION")
	stamp := fmt.Sprintf("k8s.io/kubernetes %s\nstaging %s\ngo %s\nbuilt %s\n", b.version,
		b.stagingVersion(), strings.TrimSpace(string(goVersion)), time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(tmp, stampName), []byte(stamp), 0o644); err != nil {
		return err
	}
	// An incomplete bin/ (no stamp: from an older layout or a hand edit) is moved aside:
	// rename(2) cannot replace a non-empty directory.
	if _, err := os.Stat(binDir); err == nil {
		old := binDir + fmt.Sprintf(".old-%d", time.Now().UnixNano())
		if err := os.Rename(binDir, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return err
	}
	return os.Rename(tmp, binDir)
}

// ldflags strip the binaries and stamp the release into them: without the stamp they report
// v0.0.0, and the apiserver's /version with them.
func (b *kubeBuild) ldflags() string {
	return strings.Join([]string{
		"-s", "-w",
		"-X", "k8s.io/component-base/version.gitVersion=" + b.version,
		"-X", "k8s.io/component-base/version.gitMajor=1",
		"-X", "k8s.io/component-base/version.gitMinor=" + b.minor,
		"-X", "k8s.io/component-base/version.gitTreeState=clean",
	}, " ")
}

// goCmd runs the go command in the throwaway module, appending its output to the build log;
// it returns stdout. On failure the error carries the end of the output. A command that
// runs past progressEvery says so, with the time elapsed, every progressEvery.
func (b *kubeBuild) goCmd(ctx context.Context, what string, args ...string) ([]byte, error) {
	return b.goCmdProgress(ctx, what, nil, args...)
}

// goCmdProgress is goCmd with the progress of a compilation: with compiled not nil, args
// must hold -v (the go command then names each package on stderr as it compiles it), and
// the progress lines count them.
func (b *kubeBuild) goCmdProgress(ctx context.Context, what string, compiled *packageCounter, args ...string) ([]byte, error) {
	logFile, err := os.OpenFile(b.logPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "---- %s: go %s\n", time.Now().Format(time.RFC3339), strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, b.goBin, args...)
	cmd.Dir = b.srcDir()
	cmd.Env = b.env
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if compiled != nil {
		cmd.Stderr = io.MultiWriter(&stderr, compiled)
	}
	stop := reportProgress(b.logf, what, compiled)
	err = cmd.Run()
	stop()
	logFile.Write(stdout.Bytes())
	logFile.Write(stderr.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", what, err, lastLines(stderr.String(), 15))
	}
	return stdout.Bytes(), nil
}

// progressEvery is how often a long go command says how far it is.
const progressEvery = 30 * time.Second

// reportProgress logs, every progressEvery until stop is called, that what is still running,
// the time elapsed and, with compiled not nil, the packages compiled so far.
func reportProgress(logf func(string, ...any), what string, compiled *packageCounter) (stop func()) {
	if logf == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				logf("%s: %s, %s elapsed", what, compiled.progress(), time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// packageCounter counts the packages `go build -v` names on stderr (one import path a line,
// which has no space, unlike the compiler's messages) against Total, the packages the build
// had to compile when it started (0: not known).
type packageCounter struct {
	Total int

	mu      sync.Mutex
	partial []byte // the start of a line not yet ended
	n       int
}

func (c *packageCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := append(c.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSpace(data[:i])
		if len(line) > 0 && line[0] != '#' && !bytes.ContainsAny(line, " \t") {
			c.n++
		}
		data = data[i+1:]
	}
	c.partial = append([]byte(nil), data...)
	return len(p), nil
}

// progress says how far the build is: "still running" for a command that compiles nothing
// countable (c nil).
func (c *packageCounter) progress() string {
	if c == nil {
		return "still running"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Total == 0 {
		return fmt.Sprintf("%d packages compiled", c.n)
	}
	return fmt.Sprintf("%d of %d packages compiled", min(c.n, c.Total), c.Total)
}

// staleDeps lists, with the build flags flags, the packages of pkgs and their dependencies
// (with test, those of their tests too): all of them, and how many of them the build cache
// does not hold, that is how many a build of pkgs compiles. With test, the test binary's
// own packages (those built with the tests, ForTest, and the generated main) are left out:
// go test -c compiles them.
func (b *kubeBuild) staleDeps(ctx context.Context, test bool, flags []string, pkgs ...string) (all []string, stale int, err error) {
	args := append([]string{"list", "-deps", "-e"}, flags...)
	if test {
		args = append(args, "-test")
	}
	args = append(args, "-f", "{{.Stale}}|{{.ForTest}}|{{.ImportPath}}")
	out, err := b.goCmd(ctx, "go list", append(args, pkgs...)...)
	if err != nil {
		return nil, 0, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || f[1] != "" || (test && strings.HasSuffix(f[2], ".test")) {
			continue
		}
		all = append(all, f[2])
		if f[0] == "true" {
			stale++
		}
	}
	return all, stale, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
