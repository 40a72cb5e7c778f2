//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// E2E binaries of a release, as EnsureE2EBinaries leaves them in its directory.
const (
	E2ETestBinary = "e2e.test" // go test -c k8s.io/kubernetes/test/e2e
	GinkgoBinary  = "ginkgo"   // github.com/onsi/ginkgo/v2/ginkgo at the version the release requires
)

// EnsureE2EBinaries returns <cache>/kube/<version>/e2e, holding the upstream end-to-end suite
// of that release compiled as a test binary (e2e.test) and the ginkgo command that runs it
// in parallel, building both from the Go module proxy the first time (several minutes: the
// suite links most of Kubernetes). The module is the one EnsureKubeBinaries writes, with the
// release's staging replaces, so ginkgo comes out at the version the release's go.mod
// requires. Safe to call from many processes at once; a cancelled build leaves nothing.
func EnsureE2EBinaries(ctx context.Context, version string, logf func(string, ...any)) (string, error) {
	m := kubeVersionRE.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("e2e build: version %q is not of the form v1.X.Y", version)
	}
	out := filepath.Join(KubeCacheDir(), "kube", version, "e2e")
	ok := func(dir string) bool {
		return isExecutable(filepath.Join(dir, E2ETestBinary)) && isExecutable(filepath.Join(dir, GinkgoBinary)) &&
			isRegular(filepath.Join(dir, stampName))
	}
	return ensureCached(ctx, out, "e2e.test "+version, logf, ok, func(tmp string) error {
		// The module and its log live beside the output, so a failed build can be read.
		b := &kubeBuild{version: version, minor: m[1], verDir: filepath.Join(filepath.Dir(out), "e2e-build"),
			logf: logf, tools: []string{"k8s.io/kubernetes/test/e2e", "github.com/onsi/ginkgo/v2/ginkgo"}}
		if err := b.setUp(ctx); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		start := time.Now()
		// The suite's dependencies first, with go build -v, which names each package it
		// compiles, for the progress lines; go test -c then finds them in the build cache.
		deps, stale, err := b.staleDeps(ctx, true, []string{"-trimpath"}, "k8s.io/kubernetes/test/e2e")
		if err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		logf("e2e build: compiling k8s.io/kubernetes/test/e2e %s: %d packages (the long part; progress every %s)",
			version, stale, progressEvery)
		if _, err := b.goCmdProgress(ctx, "e2e build", &packageCounter{Total: stale},
			append([]string{"build", "-v", "-trimpath"}, deps...)...); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		// -vet=off: vetting the whole suite would double the build for nothing we act on.
		if _, err := b.goCmd(ctx, "go test -c", "test", "-c", "-vet=off", "-trimpath", "-ldflags="+b.ldflags(),
			"-o", filepath.Join(tmp, E2ETestBinary), "k8s.io/kubernetes/test/e2e"); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		if _, err := b.goCmd(ctx, "go build ginkgo", "build", "-trimpath", "-ldflags=-s -w",
			"-o", filepath.Join(tmp, GinkgoBinary), "github.com/onsi/ginkgo/v2/ginkgo"); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		ginkgoMod, err := b.goCmd(ctx, "go list", "list", "-m", "github.com/onsi/ginkgo/v2")
		if err != nil {
			return err
		}
		logf("e2e build: compiled in %s", time.Since(start).Round(time.Second))
		stamp := fmt.Sprintf("k8s.io/kubernetes %s\n%s\nbuilt %s\n", version, strings.TrimSpace(string(ginkgoMod)),
			time.Now().UTC().Format(time.RFC3339))
		return os.WriteFile(filepath.Join(tmp, stampName), []byte(stamp), 0o644)
	})
}
