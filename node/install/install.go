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
	if err := writeAtomic(dst, bin, 0o755); err != nil {
		return err
	}
	conf, err := cni.ConfList(socket)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(confDir, cni.ConfListName), conf, 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
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
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("installing %s: %w", path, err)
	}
	return nil
}
