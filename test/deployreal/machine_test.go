//go:build linux

package deployreal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// machineRootfsPackages are the Debian packages of a machine's root filesystem: systemd to
// boot, sshd and Python for Ansible, and the packages the roles install, which the machines
// cannot download (their network is the underlay alone): the roles find them installed.
var machineRootfsPackages = []string{"systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt",
	"iproute2", "iputils-ping", "procps", "kmod", "openssl", "ca-certificates",
	"ovn-central", "ovn-host", "openvswitch-switch", "openvswitch-common", "python3-cryptography"}

// ensureMachineRootfs returns a Debian 12 root filesystem directory holding
// machineRootfsPackages, made once with mmdebstrap (about two minutes) into the cache. The
// package lists are kept, as on an installed host, so that apt finds its cache. The
// directory's name carries a digest of the package list: another list, another directory.
func ensureMachineRootfs(ctx context.Context, logf func(string, ...any)) (string, error) {
	sum := sha256.Sum256([]byte(strings.Join(machineRootfsPackages, ",")))
	dir := filepath.Join(harness.KubeCacheDir(), "machines", "rootfs-bookworm-"+hex.EncodeToString(sum[:4]))
	if _, err := os.Stat(filepath.Join(dir, "lib", "systemd", "systemd")); err == nil {
		return dir, nil
	}
	// mmdebstrap refuses a target whose parent is missing: on a fresh machine (an empty
	// cache) nothing else has made <cache>/machines.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("machines' root filesystem: %w (set OVNT_CACHE_DIR to a writable directory)", err)
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	os.RemoveAll(dir) // not a finished root filesystem
	logf("making the machines' root filesystem with mmdebstrap into %s", dir)
	out, err := exec.CommandContext(ctx, "mmdebstrap", "--quiet", "--variant=minbase", "--skip=cleanup/apt/lists",
		"--include="+strings.Join(machineRootfsPackages, ","), "--dpkgopt=path-exclude=/usr/share/doc/*",
		"bookworm", tmp).CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("mmdebstrap: %w: %s", err, out)
	}
	return dir, os.Rename(tmp, dir)
}

// machineRootfs returns the machines' root filesystem, made first if the cache has none,
// before the test's own deadline starts: making it is a one-time cost (about two minutes,
// many more on a loaded machine) that must not eat the time the test gives its steps (a
// fresh machine's first TestAnsibleCentral had its playbook killed at the deadline).
func machineRootfs(t *testing.T) string {
	t.Helper()
	start := time.Now()
	rootfs, err := ensureMachineRootfs(t.Context(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("machines' root filesystem made in %s", d.Round(time.Second))
	}
	return rootfs
}

// machine is a host Ansible deploys to: a network namespace on the underlay (a harness node
// without daemons), and in it a Debian 12 system booted with systemd as PID 1 in its own PID,
// mount, UTS and IPC namespaces, on an overlay of the shared root filesystem.
type machine struct {
	name, ip, netns string
	root            string // the overlay's mount point
	boot            *harness.Proc
}

// startMachine boots a machine named name with the public key authorizedKey for root, and
// returns once its sshd accepts connections.
func startMachine(ctx context.Context, r *harness.Run, name, rootfs, authorizedKey string) (*machine, error) {
	hn, err := r.StartNode(ctx, name, harness.NodeOptions{SkipChassis: true, NoOVS: true})
	if err != nil {
		return nil, err
	}
	m := &machine{name: name, ip: hn.IP, netns: hn.Netns}
	dir := r.Path("machines", name)
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	m.root = filepath.Join(dir, "root")
	for _, d := range []string{upper, work, m.root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o",
		"lowerdir="+rootfs+",upperdir="+upper+",workdir="+work, m.root).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("machine %s: overlay: %w: %s", name, err, out)
	}
	r.AddCleanup("root filesystem of machine "+name, func() error {
		return exec.Command("umount", "-l", m.root).Run()
	})
	files := map[string]string{
		"etc/hostname":              name + "\n",
		"etc/hosts":                 "127.0.0.1 localhost\n" + hn.IP + " " + name + "\n",
		"root/.ssh/authorized_keys": authorizedKey,
		"etc/machine-id":            fmt.Sprintf("%032x\n", []byte(name)),
	}
	for p, content := range files {
		path := filepath.Join(m.root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	// The apt cache counts as fresh (the roles' cache_valid_time): the machine has no
	// way to the archive, and its packages are already installed.
	stamp := filepath.Join(m.root, "var/lib/apt/periodic/update-success-stamp")
	if err := os.MkdirAll(filepath.Dir(stamp), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return nil, err
	}
	// Inside new PID, mount, UTS and IPC namespaces: a cgroup of its own in every
	// hierarchy (systemd manages the cgroup it starts in: two machines in one would fight
	// over it; the run's teardown removes it), the kernel file systems, a private /run and
	// /tmp, the host's devices and cgroup hierarchies, then systemd as PID 1 of the root.
	script := strings.Join([]string{
		"set -e",
		"r=" + m.root,
		"cg=" + r.Name("machine-"+name),
		"for h in /sys/fs/cgroup/*/; do",
		"  mkdir -p $h$cg",
		"  for f in cpuset.cpus cpuset.mems; do if [ -f $h$f ]; then cat $h$f > $h$cg/$f; fi; done",
		"  echo $$ > $h$cg/cgroup.procs",
		"done",
		"mount -t proc proc $r/proc",
		"mount -t sysfs sysfs $r/sys",
		// A tmpfs of the machine's own over the cgroup hierarchies: systemd creates
		// directories there and remounts it read-only, which on the host's own tmpfs
		// would reach the host (the superblock is shared).
		"mount -t tmpfs -o mode=755 cgroup $r/sys/fs/cgroup",
		"for h in /sys/fs/cgroup/*/; do h=${h%/}; mkdir -p $r$h; mount --bind $h $r$h; done",
		"mount --rbind /dev $r/dev",
		"mount -t tmpfs tmpfs $r/run",
		"mount -t tmpfs tmpfs $r/tmp",
		// Shared propagation below the root, as on a host booted by systemd (which makes
		// "/" shared itself, but not when it runs in a container): systemd mounts a
		// unit's credentials in a mount namespace of its own and moves them into /run,
		// and without propagation they never reach the unit (a DynamicUser unit found an
		// empty root-only directory). The peer groups are this namespace's alone: the
		// mounts were made private when it was made.
		"mount --make-rshared $r",
		"hostname " + name,
		"exec chroot $r /lib/systemd/systemd --log-target=console",
	}, "\n")
	m.boot, err = r.Start(harness.ProcSpec{Name: "machine-" + name, Netns: hn.Netns, HostMounts: true,
		Path: "unshare", Args: []string{"--fork", "--kill-child", "--pid", "--mount", "--uts", "--ipc", "--propagation", "private", "sh", "-c", script},
		Env:        []string{"container=ovnt"},
		StopSignal: syscall.SIGKILL, StopTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	err = poll.Until(ctx, "sshd of machine "+name, time.Second, func() (bool, error) {
		select {
		case <-m.boot.Done():
			return false, fmt.Errorf("its boot ended: %v (log %s)", m.boot.Err(), r.Path("logs", "machine-"+name+".out"))
		default:
		}
		_, err := harness.Exec(ctx, hn.Netns, "bash", "-c", "exec 3<>/dev/tcp/"+hn.IP+"/22")
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("machine %s did not boot: %w", name, err)
	}
	return m, nil
}

// requireMachines skips a test of machines unless make deploy-test asked for them
// (OVNT_ANSIBLE_MACHINES=1), then requires root and what booting and reaching machines
// needs, with the test's own tools (testenv.RequireRoot).
func requireMachines(t *testing.T, tools ...string) {
	t.Helper()
	if os.Getenv("OVNT_ANSIBLE_MACHINES") == "" {
		t.Skip("opt-in: make deploy-test runs it (OVNT_ANSIBLE_MACHINES=1)")
	}
	testenv.RequireRoot(t, append([]string{"mmdebstrap", "ssh", "ssh-keygen", "unshare", "chroot", "nsenter"}, tools...)...)
}
