//go:build !windows

package cniserver

import (
	"net"
	"os"
	"path/filepath"
)

// prepareDir makes a directory Listen created exactly 0700 (MkdirAll's mode went through the
// umask) and leaves one that existed alone.
func prepareDir(dir string, made bool) error {
	if made {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// bind listens on a socket made in a private (0700) directory beside path, sets it 0600, and
// renames it to path: a client that finds path finds the restricted socket.
func bind(path string) (net.Listener, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".ovnt-cni-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	made := filepath.Join(tmp, "s")
	ln, err := net.Listen("unix", made)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	// Close removes the socket where it ends up, not where it was made.
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(made, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(made, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &movedListener{UnixListener: ul, path: path}, nil
}

// movedListener removes its socket at path when closed, as a UnixListener does where it
// was made.
type movedListener struct {
	*net.UnixListener
	path string
}

func (l *movedListener) Close() error {
	err := l.UnixListener.Close()
	if rmErr := os.Remove(l.path); rmErr != nil && !os.IsNotExist(rmErr) && err == nil {
		err = rmErr
	}
	return err
}
