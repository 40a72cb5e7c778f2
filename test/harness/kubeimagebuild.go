//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// RegressionIssue74839 is the package of the upstream e2e suite's "boom server" (its
// conntrack test "should not be vulnerable to the invalid conntrack state bug"): a TCP
// server that answers each new connection with an out-of-window segment over a raw socket.
const RegressionIssue74839 = "test/images/regression-issue-74839"

// EnsureKubeTestImage returns the path of the binary of one test image package of
// k8s.io/kubernetes at version (pkg relative to the module, e.g. RegressionIssue74839),
// building it the first time from the Go module proxy into
// <cache>/kube/<version>/images/<name>. It is kept apart from EnsureKubeBinaries' bin/ so
// that adding an image does not invalidate (and rebuild) the control plane's binaries.
// Safe to call from many processes at once; a failed build leaves nothing.
func EnsureKubeTestImage(ctx context.Context, version, pkg string, logf func(string, ...any)) (string, error) {
	m := kubeVersionRE.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("kube test image build: version %q is not of the form v1.X.Y", version)
	}
	name := filepath.Base(pkg)
	out := filepath.Join(KubeCacheDir(), "kube", version, "images", name)
	what := "kube test image " + name + " " + version
	return ensureCached(ctx, out, what, logf, isExecutable, func(tmp string) error {
		// The module (with the release's staging replaces) and its log live beside the
		// output, so a failed build can be read.
		b := &kubeBuild{version: version, minor: m[1], verDir: filepath.Join(filepath.Dir(out), name+"-build"),
			logf: logf, tools: []string{"k8s.io/kubernetes/" + pkg}}
		if err := b.setUp(ctx); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		if _, err := b.goCmd(ctx, "go build", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "k8s.io/kubernetes/"+pkg); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath())
		}
		return os.Chmod(tmp, 0o755)
	})
}
