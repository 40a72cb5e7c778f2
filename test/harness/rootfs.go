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

// AgnhostRootfsPackages are the Debian packages of the root filesystem the agnhost image
// is built on: the tools the upstream image carries that tests run inside it.
var AgnhostRootfsPackages = []string{"bash", "curl", "netcat-openbsd", "dnsutils", "iproute2", "iputils-ping", "ca-certificates"}

// EnsureAgnhostRootfs returns a tar of a minimal Debian 12 root filesystem holding
// AgnhostRootfsPackages, made once with mmdebstrap from Debian's archive (about half a
// minute) into <cache>/images/agnhost-rootfs-bookworm.tar. Documentation, manual pages and
// translations are left out. Safe to call from many processes at once.
func EnsureAgnhostRootfs(ctx context.Context, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir := filepath.Join(KubeCacheDir(), "images")
	out := filepath.Join(dir, "agnhost-rootfs-bookworm.tar")
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "rootfs.lock"), logf)
	if err != nil {
		return "", err
	}
	defer unlock()
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() {
		return out, nil
	}
	os.RemoveAll(out) // not a finished tar
	start := time.Now()
	logf("agnhost root filesystem: mmdebstrap of Debian 12 into %s (cached for next time)", out)
	tmp := out + ".tmp"
	args := []string{"--quiet", "--format=tar", "--variant=essential", "--include=" + strings.Join(AgnhostRootfsPackages, ",")}
	for _, p := range []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"} {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, "bookworm", tmp)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mmdebstrap: %w: %s", err, lastLines(string(b), 15))
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	logf("agnhost root filesystem: done in %s", time.Since(start).Round(time.Second))
	return out, nil
}
