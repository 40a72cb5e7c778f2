package ovsdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// nbSchema is the pinned Northbound schema (ovsdbtest names the schema files).
var nbSchema = ovsdbtest.NB.Path()

// Hand-written models for a few Northbound tables. Each lists only some columns of its table;
// libovsdb ignores the others.
type testLS struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

type testLSP struct {
	UUID       string `ovsdb:"_uuid"`
	Name       string `ovsdb:"name"`
	TagRequest *int   `ovsdb:"tag_request"`
}

type testAddressSet struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Addresses   []string          `ovsdb:"addresses"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

func testNBModel(t *testing.T) model.ClientDBModel {
	t.Helper()
	m, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{
		"Logical_Switch":      &testLS{},
		"Logical_Switch_Port": &testLSP{},
		"Address_Set":         &testAddressSet{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tools are the OVS/OVN programs the tests run.
type tools struct {
	server, tool, nbctl, appctl string
}

// needTools stops the test when one of the programs is missing (testenv.Require: a skip, or
// a failure in CI).
func needTools(t *testing.T) tools {
	t.Helper()
	tl := tools{server: "ovsdb-server", tool: "ovsdb-tool", nbctl: "ovn-nbctl", appctl: "ovs-appctl"}
	testenv.Require(t, tl.server, tl.tool, tl.nbctl, tl.appctl)
	return tl
}

// shortTempDir is a temporary directory with a short path: a unix socket path must fit in
// sockaddr_un (108 bytes), which t.TempDir() paths with long test names do not.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ovsdb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// run runs an OVS/OVN command line tool and returns its standard output.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(dir string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = ovsEnv(dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// ovsEnv keeps OVS programs away from the system's run, log and database directories.
func ovsEnv(dir string) []string {
	return append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir)
}

// server is one ovsdb-server process, run in the foreground as a child of the test.
type server struct {
	t     *testing.T
	tl    tools
	dir   string
	name  string
	db    string // database file
	sock  string // unix socket, always served
	ctl   string // unixctl socket for ovs-appctl
	log   string
	extra []string // more ovsdb-server options, such as --remote=ptcp:0:127.0.0.1

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// newStandalone creates a standalone Northbound database file in dir.
func newStandalone(t *testing.T, tl tools, dir, name string, extra ...string) *server {
	t.Helper()
	s := newServer(t, tl, dir, name, extra...)
	run(t, dir, tl.tool, "create", s.db, nbSchema)
	return s
}

// newServer describes a server; its process is stopped when the test ends, after the
// clients created later in the test are closed (cleanups run last-in first-out).
func newServer(t *testing.T, tl tools, dir, name string, extra ...string) *server {
	s := &server{
		t: t, tl: tl, dir: dir, name: name, extra: extra,
		db:   filepath.Join(dir, name+".db"),
		sock: filepath.Join(dir, name+".sock"),
		ctl:  filepath.Join(dir, name+".ctl"),
		log:  filepath.Join(dir, name+".log"),
	}
	t.Cleanup(s.stop)
	return s
}

func (s *server) unixRemote() string { return "unix:" + s.sock }

// start runs ovsdb-server on the database and waits until it accepts connections on its
// unix socket. The process is stopped when the test ends, whatever the outcome.
func (s *server) start() {
	s.t.Helper()
	args := append([]string{
		s.db,
		"--remote=punix:" + s.sock,
		"--unixctl=" + s.ctl,
		"--pidfile=" + filepath.Join(s.dir, s.name+".pid"),
		"--log-file=" + s.log,
		"--no-chdir",
		"-vconsole:off",
	}, s.extra...)
	console, err := os.OpenFile(filepath.Join(s.dir, s.name+".console"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer console.Close()
	cmd := exec.Command(s.tl.server, args...)
	cmd.Env = ovsEnv(s.dir)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	poll.Eventually(s.t, context.Background(), "ovsdb-server "+s.name+" on "+s.sock, 10*time.Second, 20*time.Millisecond, func() (bool, error) {
		select {
		case <-done:
			s.t.Fatalf("ovsdb-server %s exited at start: %s", s.name, s.logTail())
		default:
		}
		conn, err := net.Dial("unix", s.sock)
		if err != nil {
			return false, fmt.Errorf("%w; log: %s", err, s.logTail())
		}
		conn.Close()
		return true, nil
	})
}

// kill sends SIGKILL, as a crash or an OOM kill would, and waits for the process to exit.
func (s *server) kill() {
	s.t.Helper()
	s.signalAndWait(syscall.SIGKILL, 10*time.Second)
}

// stop ends the process with SIGTERM, or SIGKILL if it does not exit in 5s. It does nothing
// if the process has already exited.
func (s *server) stop() {
	if !s.signalAndWait(syscall.SIGTERM, 5*time.Second) {
		s.signalAndWait(syscall.SIGKILL, 10*time.Second)
	}
}

// signal sends sig to the running server and does not wait.
func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("signal: the server is not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) signalAndWait(sig syscall.Signal, wait time.Duration) bool {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

var listeningPort = regexp.MustCompile(`listening on port (\d+)`)

// boundPort returns the port ovsdb-server chose for a ptcp:0 or pssl:0 remote, which it
// only reports in its log.
func (s *server) boundPort() int {
	s.t.Helper()
	var port int
	poll.Eventually(s.t, context.Background(), "the port ovsdb-server "+s.name+" chose", 10*time.Second, 50*time.Millisecond, func() (bool, error) {
		b, err := os.ReadFile(s.log)
		if err != nil {
			return false, err
		}
		m := listeningPort.FindAllSubmatch(b, -1)
		if len(m) == 0 {
			return false, errors.New("no \"listening on port\" in " + s.log)
		}
		port, _ = strconv.Atoi(string(m[len(m)-1][1]))
		return true, nil
	})
	return port
}

// testLogger sends libovsdb's messages to the test log up to verbosity 3 (connections), and
// drops them once the test has ended, because libovsdb goroutines may still log then.
func testLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: 3})
}

// newClient connects a client to remotes and closes it when the test ends.
func newClient(t *testing.T, remotes string, cfg Config) client.Client {
	t.Helper()
	cfg.Remotes = remotes
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.ReconnectTimeout == 0 {
		cfg.ReconnectTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(ctx, testNBModel(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func allTables() []Table {
	return []Table{{Model: &testLS{}}, {Model: &testLSP{}}, {Model: &testAddressSet{}}}
}

// lsRow is a Logical_Switch as the tests compare it between the cache and the server.
type lsRow struct {
	Name        string
	ExternalIDs string // sorted k=v list
}

func idsString(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// cachedSwitches is the Logical_Switch table in c's cache, by UUID.
func cachedSwitches(t *testing.T, c client.Client) map[string]lsRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list []testLS
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]lsRow, len(list))
	for _, ls := range list {
		out[ls.UUID] = lsRow{Name: ls.Name, ExternalIDs: idsString(ls.ExternalIDs)}
	}
	return out
}

// serverSwitches is the Logical_Switch table as ovn-nbctl reads it from the server, by UUID.
func serverSwitches(t *testing.T, tl tools, dir, db string, extra ...string) map[string]lsRow {
	t.Helper()
	args := append([]string{"--db=" + db, "--format=json", "--columns=_uuid,name,external_ids"}, extra...)
	args = append(args, "list", "Logical_Switch")
	out := run(t, dir, tl.nbctl, args...)
	var table struct {
		Data [][]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		t.Fatalf("ovn-nbctl output %q: %v", out, err)
	}
	rows := make(map[string]lsRow, len(table.Data))
	for _, r := range table.Data {
		var uuid [2]string         // ["uuid", "..."]
		var name string            // "..."
		var ids [2]json.RawMessage // ["map", [["k","v"], ...]]
		var pairs [][2]string
		for i, v := range []interface{}{&uuid, &name, &ids} {
			if err := json.Unmarshal(r[i], v); err != nil {
				t.Fatalf("ovn-nbctl output %q: %v", out, err)
			}
		}
		if err := json.Unmarshal(ids[1], &pairs); err != nil {
			t.Fatalf("ovn-nbctl output %q: %v", out, err)
		}
		m := map[string]string{}
		for _, p := range pairs {
			m[p[0]] = p[1]
		}
		rows[uuid[1]] = lsRow{Name: name, ExternalIDs: idsString(m)}
	}
	return rows
}

// insertSwitches creates Logical_Switch rows through c and returns their UUIDs.
func insertSwitches(t *testing.T, c client.Client, switches ...*testLS) []string {
	t.Helper()
	var models []model.Model
	for _, ls := range switches {
		models = append(models, ls)
	}
	ops, err := c.Create(models...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := Transact(ctx, c, ops...)
	if err != nil {
		t.Fatal(err)
	}
	uuids := make([]string, len(results))
	for i, r := range results {
		uuids[i] = r.UUID.GoUUID
	}
	return uuids
}

func names(rows map[string]lsRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return out
}
