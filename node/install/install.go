// Package install puts the CNI plugin where the container runtime looks for it: the
// ovnt-cni binary into the runtime's CNI bin directory, and the network configuration list
// into its configuration directory.
package install

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
)

// Plugin copies the plugin binary at src to binDir/<plugin type> (with .exe on Windows)
// and writes cni.ConfListName into confDir, pointing the plugin at socket. Both files are
// written beside their final name and renamed into place, so a runtime never runs a
// half-copied binary or reads half a configuration; an identical file is left untouched.
func Plugin(src, binDir, confDir, socket string) error {
	bin, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("CNI plugin binary: %w", err)
	}
	dst := filepath.Join(binDir, cni.PluginType+exeSuffix)
	if err := writeAtomic(dst, bin, 0o755, imageLocked); err != nil {
		return err
	}
	conf, err := cni.ConfList(socket)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(confDir, cni.ConfListName), conf, 0o644, false)
}

// writeAtomic writes data to path through a temporary file renamed into place. aside is
// for a running executable on Windows, which cannot be replaced by a rename but can be
// renamed itself: the old file is moved aside first, and earlier installs' aside files are
// removed (those still running stay until a later install).
func writeAtomic(path string, data []byte, mode os.FileMode, aside bool) error {
	if aside {
		defer removeAside(path)
	}
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The temporary name starts with a dot: a runtime scanning the configuration
	// directory ignores it.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var old string
	if _, err := os.Stat(path); err == nil && aside {
		old = path + asideSuffix + strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := os.Rename(path, old); err != nil {
			return fmt.Errorf("moving %s aside: %w", path, err)
		}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		if old != "" {
			_ = os.Rename(old, path)
		}
		return fmt.Errorf("installing %s: %w", path, err)
	}
	return nil
}

const asideSuffix = ".old-"

// removeAside removes the files earlier installs moved aside from path; one a process still
// runs cannot be removed on Windows and is left for the next install.
func removeAside(path string) {
	olds, _ := filepath.Glob(path + asideSuffix + "*")
	for _, o := range olds {
		_ = os.Remove(o)
	}
}
