package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Listen opens the agent's socket at path for root alone: the directory is made 0700 and
// the socket 0600, since whoever can talk to it can plug interfaces into any namespace. A
// socket left by an agent that died is removed; one that answers belongs to a running agent,
// and Listen fails. (On Windows the file modes do not restrict access: restrictDir and
// restrictSocket give the directory and the socket an ACL for Administrators and SYSTEM.)
func Listen(ctx context.Context, path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if err := restrictDir(dir); err != nil {
		return nil, fmt.Errorf("restricting %s: %w", dir, err)
	}
	if _, err := os.Lstat(path); err == nil {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := (&net.Dialer{}).DialContext(dctx, "unix", path)
		cancel()
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("CNI socket %s: another agent is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale CNI socket %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("CNI socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := restrictSocket(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting %s: %w", path, err)
	}
	return ln, nil
}
