//go:build linux

package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// AgnhostRootfsPackages are the Debian packages of the root filesystem the agnhost image
// is built on: the tools the upstream image carries that tests run inside it.
// wget: the upstream image is Alpine's, whose busybox has it, and the upstream e2e suite
// runs it in agnhost pods (verifyServeHostnameServiceUp).
var AgnhostRootfsPackages = []string{"bash", "curl", "wget", "netcat-openbsd", "dnsutils", "iproute2", "iputils-ping", "ca-certificates"}

// EnsureAgnhostRootfs returns a tar of a minimal Debian 12 root filesystem holding
// AgnhostRootfsPackages, made once with mmdebstrap from Debian's archive (about half a
// minute) into <cache>/images/agnhost2-rootfs-bookworm.tar. Documentation, manual pages and
// translations are left out. Safe to call from many processes at once.
func EnsureAgnhostRootfs(ctx context.Context, logf func(string, ...any)) (string, error) {
	return ensureDebianRootfs(ctx, "agnhost2", AgnhostRootfsPackages, logf)
}

// NginxRootfsPackages are the Debian packages of the nginx image's root filesystem (the
// upstream e2e suite's registry.k8s.io/e2e-test-images/nginx).
var NginxRootfsPackages = []string{"nginx-light"}

// EnsureNginxRootfs is EnsureAgnhostRootfs for NginxRootfsPackages:
// <cache>/images/nginx-rootfs-bookworm.tar.
func EnsureNginxRootfs(ctx context.Context, logf func(string, ...any)) (string, error) {
	return ensureDebianRootfs(ctx, "nginx", NginxRootfsPackages, logf)
}

// ensureDebianRootfs makes <cache>/images/<name>-rootfs-bookworm.tar once. The file name
// does not say which packages it holds: change a package list, change the name too.
func ensureDebianRootfs(ctx context.Context, name string, packages []string, logf func(string, ...any)) (string, error) {
	out := filepath.Join(KubeCacheDir(), "images", name+"-rootfs-bookworm.tar")
	return ensureCached(ctx, out, name+" root filesystem (mmdebstrap of Debian 12)", logf, isRegular, func(tmp string) error {
		args := []string{"--quiet", "--format=tar", "--variant=essential", "--include=" + strings.Join(packages, ",")}
		for _, p := range []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"} {
			args = append(args, "--dpkgopt=path-exclude="+p)
		}
		if b, err := exec.CommandContext(ctx, "mmdebstrap", append(args, "bookworm", tmp)...).CombinedOutput(); err != nil {
			return fmt.Errorf("mmdebstrap: %w: %s", err, lastLines(string(b), 15))
		}
		return nil
	})
}
