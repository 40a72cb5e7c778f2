package hostnet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// setSysctl writes value to /proc/sys/<key with dots as slashes>, for the network namespace
// of the calling thread, unless it holds that value already.
func setSysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == value {
		return nil
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
