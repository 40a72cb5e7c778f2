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

// Listen opens the agent's socket at path for root alone (mode 0600), since whoever can talk
// to it can plug interfaces into any namespace. A directory Listen has to make is made 0700;
// one that exists is left as it is on Linux (it may be /run: security audit L5), where the
// socket is made in a private directory beside path and only then moved into place, so it
// is never reachable with a looser mode. A socket left by an agent that died is removed; one
// that answers belongs to a running agent, and Listen fails. (On Windows the file modes do
// not restrict access: the directory and the socket get an ACL for Administrators and
// SYSTEM, restrictDir and restrictSocket.)
func Listen(ctx context.Context, path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	_, err := os.Stat(dir)
	made := errors.Is(err, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := prepareDir(dir, made); err != nil {
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
	ln, err := bind(path)
	if err != nil {
		return nil, fmt.Errorf("CNI socket %s: %w", path, err)
	}
	return ln, nil
}
