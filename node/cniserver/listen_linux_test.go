package cniserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenLeavesAnExistingDirectoryAlone: a socket in a directory that exists (as /run
// would) does not change the directory's mode (security audit L5), and is 0600 itself; a
// directory Listen makes is 0700; a second agent is refused, a dead agent's socket replaced,
// and Close removes the socket.
func TestListenLeavesAnExistingDirectoryAlone(t *testing.T) {
	ctx := context.Background()
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(shared, "cni.sock")
	ln, err := Listen(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	mode := func(p string) os.FileMode {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	if got := mode(shared).Perm(); got != 0o755 {
		t.Errorf("existing directory's mode %o after Listen, want it left at 755", got)
	}
	if got := mode(path); got.Type() != os.ModeSocket || got.Perm() != 0o600 {
		t.Errorf("socket mode %v, want a 0600 socket", got)
	}
	entries, _ := os.ReadDir(shared)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".ovnt-cni-") {
			t.Errorf("Listen left %s behind", e.Name())
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dialling the socket: %v", err)
	}
	c.Close()
	if _, err := Listen(ctx, path); err == nil || !strings.Contains(err.Error(), "another agent") {
		t.Errorf("a second Listen while the first serves: %v, want refused", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}

	// A socket nobody serves (an agent that died) is replaced.
	dead, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()
	ln, err = Listen(ctx, path)
	if err != nil {
		t.Fatalf("Listen over a dead agent's socket: %v", err)
	}
	ln.Close()

	made := filepath.Join(t.TempDir(), "run", "ovnt")
	ln, err = Listen(ctx, filepath.Join(made, "cni.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := mode(made).Perm(); got != 0o700 {
		t.Errorf("directory Listen made: mode %o, want 700", got)
	}
}
