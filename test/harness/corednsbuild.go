//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CoreDNSVersion is the CoreDNS release the test cluster runs as its DNS (and the external
// host as the outside world's), the one kubeadm installs with Kubernetes 1.34.
const CoreDNSVersion = "v1.12.1"

// EnsureCoreDNS returns the path of a coredns binary of CoreDNSVersion, building it the first
// time from the Go module proxy with `go install module@version` (outside this module, so its
// client-go does not mix with ours) into <cache>/coredns/<version>/coredns. Like
// EnsureKubeBinaries it is safe to call from many processes at once.
func EnsureCoreDNS(ctx context.Context, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir := filepath.Join(KubeCacheDir(), "coredns", CoreDNSVersion)
	bin := filepath.Join(dir, "coredns")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("coredns build: %w (set OVNT_CACHE_DIR to a writable directory)", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "build.lock"), logf)
	if err != nil {
		return "", fmt.Errorf("coredns build: %w", err)
	}
	defer unlock()
	if isExecutable(bin) {
		return bin, nil
	}
	start := time.Now()
	logf("coredns build: building %s into %s (2-4 minutes when the Go caches are cold; cached for next time)", CoreDNSVersion, bin)
	tmp, err := os.MkdirTemp(dir, "bin-tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "github.com/coredns/coredns@"+CoreDNSVersion)
	cmd.Dir = tmp
	// The Kubernetes build's environment (static, for this machine, no workspace) without its
	// -mod=mod, which go install module@version refuses.
	var env []string
	for _, kv := range kubeBuildEnv(os.Environ()) {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "GOBIN="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("coredns build: go install: %w: %s", err, lastLines(string(out), 15))
	}
	if err := os.Rename(filepath.Join(tmp, "coredns"), bin); err != nil {
		return "", err
	}
	logf("coredns build: %s done in %s", CoreDNSVersion, time.Since(start).Round(time.Second))
	return bin, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
