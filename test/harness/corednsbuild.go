//go:build linux

package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CoreDNSVersion is the CoreDNS release the test cluster runs as its DNS (and the external
// host as the outside world's), the one kubeadm installs with Kubernetes 1.34.
const CoreDNSVersion = "v1.12.1"

// EnsureCoreDNS returns the path of a coredns binary of CoreDNSVersion, building it the first
// time from the Go module proxy with `go install module@version` (outside this module, so its
// client-go does not mix with ours) into <cache>/coredns/<version>/coredns. Like
// EnsureKubeBinaries it is safe to call from many processes at once.
func EnsureCoreDNS(ctx context.Context, logf func(string, ...any)) (string, error) {
	bin := filepath.Join(KubeCacheDir(), "coredns", CoreDNSVersion, "coredns")
	what := "coredns build " + CoreDNSVersion + " (2-4 minutes when the Go caches are cold)"
	return ensureCached(ctx, bin, what, logf, isExecutable, func(tmp string) error {
		gobin, err := os.MkdirTemp(filepath.Dir(bin), "bin-tmp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(gobin)
		// -v names each package as it is compiled, for the progress lines (no total: go
		// list does not take module@version).
		cmd := exec.CommandContext(ctx, "go", "install", "-v", "-trimpath", "github.com/coredns/coredns@"+CoreDNSVersion)
		cmd.Dir = gobin
		// The Kubernetes build's environment (static, for this machine, no workspace)
		// without its -mod=mod, which go install module@version refuses.
		var env []string
		for _, kv := range kubeBuildEnv(os.Environ()) {
			if !strings.HasPrefix(kv, "GOFLAGS=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "GOBIN="+gobin)
		var out bytes.Buffer
		compiled := &packageCounter{}
		cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(&out, compiled)
		stop := reportProgress(logf, "coredns build", compiled)
		err = cmd.Run()
		stop()
		if err != nil {
			return fmt.Errorf("go install: %w: %s", err, lastLines(out.String(), 15))
		}
		return os.Rename(filepath.Join(gobin, "coredns"), tmp)
	})
}
