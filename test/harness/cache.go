//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ensureCached returns out, a file of the harness's cache, making it the first time with
// build, which writes the file it is given; ok says whether a file at out is finished.
// Concurrent callers (go test runs packages in parallel) wait on <out>.lock while one
// builds; the file appears by a rename, so nobody ever sees it half made. what names the
// file in the progress lines and errors.
func ensureCached(ctx context.Context, out, what string, logf func(string, ...any), ok func(string) bool, build func(tmp string) error) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if ok(out) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("%s: %w (set OVNT_CACHE_DIR to a writable directory)", what, err)
	}
	unlock, err := lockFile(ctx, out+".lock", logf)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if ok(out) {
		return out, nil
	}
	os.RemoveAll(out) // not a finished file
	start := time.Now()
	logf("%s: making %s (cached for next time)", what, out)
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := build(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	logf("%s: done in %s", what, time.Since(start).Round(time.Second))
	return out, nil
}

func isRegular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
