// Package ovsdbtest serves a database from a real ovsdb-server in t.TempDir(), for tests that
// check the rows code leaves behind. It is the one place tests start a bare ovsdb-server, and
// it names the schemas once: the pinned ones in ovsdb-models/schemas, which the generated
// models match by construction. It needs ovsdb-tool and ovsdb-server (Debian's
// openvswitch-common), not root.
package ovsdbtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// Schema is one of the pinned schemas.
type Schema string

// The pinned schemas (ovsdb-models/schemas).
const (
	NB      Schema = "ovn-nb.ovsschema"
	SB      Schema = "ovn-sb.ovsschema"
	VSwitch Schema = "vswitch.ovsschema"
)

// Path is the absolute path of the pinned schema s.
func (s Schema) Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "ovsdb-models", "schemas", string(s))
}

// Server is a running ovsdb-server with one database.
type Server struct {
	// Remote is the unix socket to connect to, as "unix:/path".
	Remote string
	// Dir is the server's directory (database file, socket, log).
	Dir string
}

// Start serves an empty database of schema s until the test ends.
func Start(tb testing.TB, s Schema) *Server {
	tb.Helper()
	return StartFile(tb, s.Path())
}

// StartArgs is Start with further ovsdb-server options (remotes: what a service's command
// line gives the real one).
func StartArgs(tb testing.TB, s Schema, args ...string) *Server {
	tb.Helper()
	return StartFile(tb, s.Path(), args...)
}

// StartFile is StartArgs for the schema in the file at path: another version than the
// pinned one, as a server of an older or newer OVN has.
func StartFile(tb testing.TB, path string, args ...string) *Server {
	tb.Helper()
	testenv.Require(tb, "ovsdb-tool", "ovsdb-server")
	dir := tb.TempDir()
	db, sock := filepath.Join(dir, "conf.db"), filepath.Join(dir, "db.sock")
	if out, err := exec.Command("ovsdb-tool", "create", db, path).CombinedOutput(); err != nil {
		tb.Fatalf("ovsdb-tool create %s: %v: %s", path, err, out)
	}
	srv := exec.Command("ovsdb-server", append([]string{db, "--remote=punix:" + sock, "--unixctl=" + filepath.Join(dir, "ctl"),
		"--no-chdir", "-vconsole:off", "-vsyslog:off", "--log-file=" + filepath.Join(dir, "ovsdb-server.log")}, args...)...)
	if err := srv.Start(); err != nil {
		tb.Fatalf("ovsdb-server: %v", err)
	}
	tb.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	if err := WaitForSocket(sock, 10*time.Second); err != nil {
		tb.Fatalf("ovsdb-server: %v", err)
	}
	return &Server{Remote: "unix:" + sock, Dir: dir}
}

// WaitForSocket waits until something accepts connections on the unix socket at path (not
// merely until the file exists: a daemon creates the file before it listens, and a restarted
// one leaves the old file behind until it binds again).
func WaitForSocket(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := dialUnix(path)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Exec runs an ovs/ovn CLI (ovs-vsctl, ovn-nbctl) against the server with args and returns
// its trimmed output; the CLIs are the oracles of what the code under test left behind.
func (s *Server) Exec(tb testing.TB, cli string, args ...string) string {
	tb.Helper()
	testenv.Require(tb, cli)
	out, err := exec.Command(cli, append([]string{"--db=" + s.Remote}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v: %s", cli, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
