//go:build linux

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// OVNRootfsPins are the exact Debian versions of OVN and OVS the harness runs when
// OVNT_OVN selects them (OVNSelected): Debian sid's, since no stable release of Debian
// carries OVN 25.09 or later. sid keeps only its newest version of a package: when the
// mirror has moved on, EnsureOVNRootfs fails and names the pin to bump here.
var OVNRootfsPins = []string{
	"ovn-central=26.03.1-1",
	"ovn-host=26.03.1-1",
	"ovn-common=26.03.1-1",
	"openvswitch-switch=4.0.0-2+b1",
	"openvswitch-common=4.0.0-2+b1",
}

// OVNRootfsSuite is the Debian suite the pinned packages come from.
const OVNRootfsSuite = "sid"

// ovnEnv selects the OVN and OVS the harness runs: "system" (or unset) for the host's own
// packages (Debian 12: OVN 23.03.1, OVS 3.1.0), OVNRootfsRelease for the pinned rootfs.
const ovnEnv = "OVNT_OVN"

// OVNRootfsRelease is the OVN release of OVNRootfsPins, the value of OVNT_OVN that selects it.
const OVNRootfsRelease = "26.03"

// OVNSelected reports whether OVNT_OVN selects the pinned rootfs over the host's packages,
// and fails for a value it does not know.
func OVNSelected() (bool, error) {
	switch v := os.Getenv(ovnEnv); v {
	case "", "system":
		return false, nil
	case OVNRootfsRelease:
		return true, nil
	default:
		return false, fmt.Errorf("harness: %s=%q: want %q (the pinned rootfs) or \"system\" (the host's packages)", ovnEnv, v, OVNRootfsRelease)
	}
}

// OVNRootfs is a built root filesystem holding the pinned OVN and OVS.
type OVNRootfs struct {
	// Dir holds root/ (the file system) and bin/ (a launcher per OVS and OVN program).
	Dir string
}

// Root is the root file system: schemas are under Root()/usr/share.
func (o OVNRootfs) Root() string { return filepath.Join(o.Dir, "root") }

// Bin is the directory of launchers: bin/ovs-vswitchd runs root/usr/sbin/ovs-vswitchd with
// the rootfs's own dynamic loader and libraries (the binaries need a newer glibc than the
// host's), with the same pid, arguments and environment. Put it first on PATH.
func (o OVNRootfs) Bin() string { return filepath.Join(o.Dir, "bin") }

// ovnRootfsStamp marks a finished rootfs directory; it holds the pins and the installed
// versions of every package (dpkg-query), written last before the directory is renamed
// into place.
const ovnRootfsStamp = "versions.txt"

// ovnRootfsName is the cache directory's name, made of the pins so that bumping a pin
// builds a new one beside the old.
func ovnRootfsName() string {
	var b strings.Builder
	b.WriteString("ovn-rootfs-" + OVNRootfsSuite)
	for _, p := range OVNRootfsPins {
		b.WriteString("_" + strings.ReplaceAll(p, "=", "-"))
	}
	return b.String()
}

// OVNRootfsDir is where EnsureOVNRootfs puts the rootfs: <cache>/ovn/<pins>.
func OVNRootfsDir() string { return filepath.Join(KubeCacheDir(), "ovn", ovnRootfsName()) }

// EnsureOVNRootfs returns the pinned rootfs, building it the first time with mmdebstrap
// from Debian's mirror (about a minute and 190 MB; documentation, manual pages and
// translations left out) into OVNRootfsDir. Safe to call from many processes at once: one
// builds under a flock while the others wait. A pinned version the mirror no longer serves
// fails the build with the pin to bump.
func EnsureOVNRootfs(ctx context.Context, logf func(string, ...any)) (OVNRootfs, error) {
	out := OVNRootfsDir()
	ok := func(dir string) bool { return isRegular(filepath.Join(dir, ovnRootfsStamp)) }
	dir, err := ensureCached(ctx, out, "OVN rootfs ("+strings.Join(OVNRootfsPins, " ")+")", logf, ok, func(tmp string) error {
		return buildOVNRootfs(ctx, tmp, out)
	})
	return OVNRootfs{Dir: dir}, err
}

// buildOVNRootfs makes the rootfs in tmp, whose launchers name final, where it is renamed to.
func buildOVNRootfs(ctx context.Context, tmp, final string) error {
	if err := os.MkdirAll(filepath.Join(tmp, "bin"), 0o755); err != nil {
		return err
	}
	root := filepath.Join(tmp, "root")
	// Not --quiet: it also silences apt's "Version '...' for '...' was not found", which
	// names the pin to bump.
	args := []string{"--variant=essential", "--format=directory",
		"--include=" + strings.Join(OVNRootfsPins, ","),
		// The mirror's sid Release file is past its Valid-Until date.
		`--aptopt=Acquire::Check-Valid-Until "false"`, `--aptopt=Acquire::Check-Date "false"`}
	for _, p := range []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"} {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	b, err := exec.CommandContext(ctx, "mmdebstrap", append(args, OVNRootfsSuite, root, "http://deb.debian.org/debian")...).CombinedOutput()
	if err != nil {
		if pin := missingPin(string(b)); pin != "" {
			return fmt.Errorf("Debian's mirror (%s) no longer serves %s: bump that pin in test/harness/ovnrootfs.go (OVNRootfsPins) to the version `apt-cache policy` shows for %s", OVNRootfsSuite, pin, OVNRootfsSuite)
		}
		return fmt.Errorf("mmdebstrap: %w: %s", err, lastLines(string(b), 15))
	}
	loader := filepath.Join(root, "usr/lib64/ld-linux-x86-64.so.2")
	if !isRegular(loader) {
		return fmt.Errorf("the rootfs has no dynamic loader at %s", loader)
	}
	have := map[string]bool{}
	for _, d := range []string{"usr/bin", "usr/sbin"} {
		ents, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			return err
		}
		for _, e := range ents {
			n := e.Name()
			if !strings.HasPrefix(n, "ovs") && !strings.HasPrefix(n, "ovn") {
				continue
			}
			// ovs-vswitchd is an absolute link through /etc/alternatives: followed on the
			// host, it would reach the host's own.
			target, err := resolveIn(root, "/"+d+"/"+n)
			if err != nil {
				return err
			}
			if !isELF(filepath.Join(root, target)) {
				continue // the Python and shell tools run with the host's interpreters, if at all
			}
			fr := filepath.Join(final, "root")
			script := fmt.Sprintf("#!/bin/sh\n# %s of the pinned OVN rootfs (test/harness/ovnrootfs.go)\nexec %s --library-path %s %s \"$@\"\n",
				n, filepath.Join(fr, "usr/lib64/ld-linux-x86-64.so.2"), filepath.Join(fr, "usr/lib/x86_64-linux-gnu"), filepath.Join(fr, target))
			if err := os.WriteFile(filepath.Join(tmp, "bin", n), []byte(script), 0o755); err != nil {
				return err
			}
			have[n] = true
		}
	}
	for _, want := range []string{"ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovs-vsctl", "ovn-controller", "ovn-northd", "ovn-nbctl", "ovn-sbctl"} {
		if !have[want] {
			return fmt.Errorf("the rootfs has no %s", want)
		}
	}
	q, err := exec.CommandContext(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Package} ${Version}\n").Output()
	if err != nil {
		return fmt.Errorf("dpkg-query in the rootfs: %w", err)
	}
	stamp := "# pins: " + strings.Join(OVNRootfsPins, " ") + "\n" + string(q)
	return os.WriteFile(filepath.Join(tmp, ovnRootfsStamp), []byte(stamp), 0o644)
}

// aptVersionNotFound is apt's error for a pkg=version the archive lacks.
var aptVersionNotFound = regexp.MustCompile(`Version '([^']+)' for '([^']+)' was not found`)

// missingPin returns the pin that apt's output says the mirror does not have, or "".
func missingPin(out string) string {
	if m := aptVersionNotFound.FindStringSubmatch(out); m != nil {
		return m[2] + "=" + m[1]
	}
	return ""
}

// resolveIn follows the symbolic links of path (absolute, in root's terms) as if root were
// "/", and returns the file it names, in root's terms.
func resolveIn(root, path string) (string, error) {
	for hops := 0; hops < 16; hops++ {
		fi, err := os.Lstat(filepath.Join(root, path))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return path, nil
		}
		t, err := os.Readlink(filepath.Join(root, path))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		path = filepath.Clean(t)
	}
	return "", fmt.Errorf("%s: too many symbolic links in the rootfs", path)
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.Read(magic[:]); err != nil {
		return false
	}
	return bytes.Equal(magic[:], []byte("\x7fELF"))
}

var (
	useOVNOnce sync.Once
	useOVNRoot OVNRootfs
	useOVNErr  error
)

// UseSelectedOVN makes this process and its children run the OVN and OVS OVNT_OVN selects:
// for the pinned rootfs it builds it if needed and puts its launchers first on PATH, so
// that every OVS and OVN program the harness, the tests and the agents start is the
// rootfs's; for the host's packages it does nothing. NewRun calls it.
func UseSelectedOVN(ctx context.Context, logf func(string, ...any)) error {
	sel, err := OVNSelected()
	if err != nil || !sel {
		return err
	}
	useOVNOnce.Do(func() {
		useOVNRoot, useOVNErr = EnsureOVNRootfs(ctx, logf)
		if useOVNErr != nil {
			return
		}
		if !strings.HasPrefix(os.Getenv("PATH"), useOVNRoot.Bin()+":") {
			useOVNErr = os.Setenv("PATH", useOVNRoot.Bin()+":"+os.Getenv("PATH"))
		}
	})
	return useOVNErr
}

// ovnShare returns the path of a file of an OVS or OVN package (a schema) in the OVN the
// run uses: in the rootfs when UseSelectedOVN chose it, else on the host.
func ovnShare(path string) string {
	if sel, _ := OVNSelected(); sel && useOVNRoot.Dir != "" {
		return filepath.Join(useOVNRoot.Root(), path)
	}
	return path
}

// checkEncapType fails for an ovn-encap-type the run's SB schema does not allow: the SB of
// OVN 26.03 (schema 21.8.0) has no "stt", which OVN 23.03's (20.27.0) has, and a chassis
// asking for it would never register (ovn-controller's Encap row breaks the schema).
func checkEncapType(encap string) error {
	types, err := schemaEnum(ovnShare(sbSchema), "Encap", "type")
	if err != nil {
		return err
	}
	if !slices.Contains(types, encap) {
		return fmt.Errorf("ovn-encap-type %q: the SB schema of this OVN (%s) allows only %v; STT needs OVN 23.03 (OVNT_OVN=system)", encap, ovnShare(sbSchema), types)
	}
	return nil
}

// schemaEnum returns the values the schema in file allows in table's column (a string
// column with an enum).
func schemaEnum(file, table, column string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s struct {
		Tables map[string]struct {
			Columns map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"columns"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	// A column's type is an atomic type's name or an object; its key likewise; an enum is
	// ["set", [values...]].
	var typ struct {
		Key struct {
			Enum []any `json:"enum"`
		} `json:"key"`
	}
	if err := json.Unmarshal(s.Tables[table].Columns[column].Type, &typ); err != nil || len(typ.Key.Enum) != 2 {
		return nil, fmt.Errorf("%s: %s.%s has no enum", file, table, column)
	}
	vals, _ := typ.Key.Enum[1].([]any)
	var out []string
	for _, v := range vals {
		if str, ok := v.(string); ok {
			out = append(out, str)
		}
	}
	return out, nil
}
