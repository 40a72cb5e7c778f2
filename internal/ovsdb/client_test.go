package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

func TestParseRemotes(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "unix:/run/ovn/ovnnb_db.sock", want: []string{"unix:/run/ovn/ovnnb_db.sock"}},
		{
			in:   "ssl:10.0.0.1:6641, ssl:10.0.0.2:6641,ssl:[fd00::3]:6641",
			want: []string{"ssl:10.0.0.1:6641", "ssl:10.0.0.2:6641", "ssl:[fd00::3]:6641"},
		},
		{in: "tcp:127.0.0.1:6641,", want: []string{"tcp:127.0.0.1:6641"}},
		{in: "", wantErr: true},
		{in: " , ", wantErr: true},
		{in: "unix:nb.sock", wantErr: true},           // relative: libovsdb would use its default socket
		{in: "unix:/tmp/a#b", wantErr: true},          // not a URL path
		{in: "tcp:127.0.0.1", wantErr: true},          // no port
		{in: "tcp::6641", wantErr: true},              // no host
		{in: "ptcp:6641:127.0.0.1", wantErr: true},    // a server's listening remote
		{in: "/run/ovn/ovnnb_db.sock", wantErr: true}, // no method
	}
	for _, tt := range tests {
		got, err := parseRemotes(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseRemotes(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseRemotes(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, cfg := range map[string]Config{
		"no tables":  {Remotes: "unix:/nonexistent.sock"},
		"bad remote": {Remotes: "tcp:nohost", Tables: allTables()},
		"ssl no key": {Remotes: "ssl:127.0.0.1:6641", Tables: allTables()},
		"bad metrics prefix": {Remotes: "unix:/nonexistent.sock", Tables: allTables(),
			Metrics: prometheus.NewRegistry(), MetricsPrefix: "ovnt"},
	} {
		if c, err := New(ctx, testNBModel(t), cfg); err == nil {
			c.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestConnectUnixAndTCP writes a Logical_Switch through each kind of remote and checks it
// in the client's cache and with ovn-nbctl.
func TestConnectUnixAndTCP(t *testing.T) {
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb", "--remote=ptcp:0:127.0.0.1")
	s.start()
	tcp := fmt.Sprintf("tcp:127.0.0.1:%d", s.boundPort())

	for _, remote := range []string{s.unixRemote(), tcp} {
		kind, _, _ := strings.Cut(remote, ":")
		t.Run(kind, func(t *testing.T) {
			c := newClient(t, remote, Config{Tables: allTables()})
			if got := c.CurrentEndpoint(); got != remote {
				t.Errorf("CurrentEndpoint() = %q, want %q", got, remote)
			}
			name := "ls-" + kind
			uuid := insertSwitches(t, c, &testLS{Name: name, ExternalIDs: map[string]string{"owner": "test"}})[0]

			poll.Eventually(t, context.Background(), "switch "+name+" in the cache", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
				got, ok := cachedSwitches(t, c)[uuid]
				want := lsRow{Name: name, ExternalIDs: "owner=test"}
				return ok && got == want, fmt.Errorf("cache has %+v, want %s: %+v", got, uuid, want)
			})
			list := run(t, dir, tl.nbctl, "--db="+remote, "ls-list")
			if want := uuid + " (" + name + ")"; !strings.Contains(list, want) {
				t.Errorf("ovn-nbctl ls-list:\n%s\nwant a line %q", list, want)
			}
			show := run(t, dir, tl.nbctl, "--db="+remote, "show")
			if want := "switch " + uuid + " (" + name + ")"; !strings.Contains(show, want) {
				t.Errorf("ovn-nbctl show:\n%s\nwant %q", show, want)
			}
		})
	}
}

// TestNewWaitsForServer starts the client before the server: New retries until it is up.
func TestNewWaitsForServer(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	type result struct {
		c   client.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := New(ctx, testNBModel(t), Config{Remotes: s.unixRemote(), Tables: allTables(), Logger: testLogger(t)})
		done <- result{c, err}
	}()
	time.Sleep(700 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("New returned before the server started: %v", r.err)
	default:
	}
	s.start()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(r.c.Close)
	insertSwitches(t, r.c, &testLS{Name: "late"})

	// Without a server, New gives up when its context is done and says why.
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	_, err := New(ctx, testNBModel(t), Config{Remotes: "unix:" + dir + "/none.sock", Tables: allTables()})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("New without server: err = %v, want deadline exceeded naming the socket", err)
	}
}

// TestOnlyRequestedTablesAreCached monitors one table, and one column of it, of a model
// that has three tables.
func TestOnlyRequestedTablesAreCached(t *testing.T) {
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	db := "--db=" + s.unixRemote()
	run(t, dir, tl.nbctl, db, "ls-add", "sw1", "--", "set", "Logical_Switch", "sw1", "external_ids:owner=x")
	run(t, dir, tl.nbctl, db, "create", "Address_Set", "name=as1", "addresses=10.0.0.1")
	run(t, dir, tl.nbctl, db, "lsp-add", "sw1", "p1")

	ls := &testLS{}
	c := newClient(t, s.unixRemote(), Config{Tables: []Table{{Model: ls, Fields: []interface{}{&ls.Name}}}})
	// A row written after the monitor started must be skipped too.
	run(t, dir, tl.nbctl, db, "ls-add", "sw2", "--", "create", "Address_Set", "name=as2")
	poll.Eventually(t, context.Background(), "sw1 and sw2 in the cache", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		got := names(cachedSwitches(t, c))
		return reflect.DeepEqual(got, []string{"sw1", "sw2"}), fmt.Errorf("cached switches %q", got)
	})

	for table, n := range map[string]int{"Address_Set": 0, "Logical_Switch_Port": 0, "Logical_Switch": 2} {
		if got := c.Cache().Table(table).Len(); got != n {
			t.Errorf("cache table %s has %d rows, want %d", table, got, n)
		}
	}
	var sets []testAddressSet
	if err := c.List(context.Background(), &sets); err != nil || len(sets) != 0 {
		t.Errorf("List(Address_Set) = %v, %v; want no rows", sets, err)
	}
	for _, row := range cachedSwitches(t, c) {
		if row.ExternalIDs != "" {
			t.Errorf("switch %s: external_ids %q in cache, but only name is monitored", row.Name, row.ExternalIDs)
		}
	}
}

// TestReconnectAfterKill kills the server with SIGKILL, changes the database while the client
// is away, and checks that the client's cache converges to exactly the server's content.
func TestReconnectAfterKill(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	c := newClient(t, s.unixRemote(), Config{Tables: allTables()})
	uuids := insertSwitches(t, c,
		&testLS{Name: "keep"},
		&testLS{Name: "gone-offline"},
		&testLS{Name: "changed-offline", ExternalIDs: map[string]string{"v": "1"}},
		&testLS{Name: "gone-after-restart"},
	)
	poll.Eventually(t, context.Background(), "4 switches in the cache", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		n := len(cachedSwitches(t, c))
		return n == 4, fmt.Errorf("%d switches in cache, want 4", n)
	})

	s.kill()
	// libovsdb's Connected() stays true while it reconnects; CurrentEndpoint() is empty.
	poll.Eventually(t, context.Background(), "the client to see the server gone", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		return c.CurrentEndpoint() == "", errors.New("client still connected")
	})

	// Change the database file while no server runs.
	run(t, dir, tl.tool, "transact", s.db, `["OVN_Northbound",
		{"op":"delete","table":"Logical_Switch","where":[["name","==","gone-offline"]]},
		{"op":"update","table":"Logical_Switch","where":[["name","==","changed-offline"]],
		 "row":{"external_ids":["map",[["v","2"]]]}},
		{"op":"insert","table":"Logical_Switch","row":{"name":"added-offline"}}]`)

	s.start()
	// These race with the client's reconnection; either order must end in the same cache.
	db := "--db=" + s.unixRemote()
	run(t, dir, tl.nbctl, db, "ls-add", "added-after-restart")
	run(t, dir, tl.nbctl, db, "ls-del", "gone-after-restart")

	// A transaction issued now waits for the reconnection.
	insertSwitches(t, c, &testLS{Name: "added-by-client"})

	want := []string{"added-after-restart", "added-by-client", "added-offline", "changed-offline", "keep"}
	poll.Eventually(t, context.Background(), "the cache to match the restarted server", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		cached, onServer := cachedSwitches(t, c), serverSwitches(t, tl, dir, s.unixRemote())
		if !reflect.DeepEqual(cached, onServer) {
			return false, fmt.Errorf("cache %v, server %v", cached, onServer)
		}
		return reflect.DeepEqual(names(cached), want), fmt.Errorf("switches %q, want %q", names(cached), want)
	})
	cached := cachedSwitches(t, c)
	if got := cached[uuids[0]]; got.Name != "keep" {
		t.Errorf("row %s is %+v, want the same row \"keep\" as before the restart", uuids[0], got)
	}
	if got := cached[uuids[2]]; got.ExternalIDs != "v=2" {
		t.Errorf("changed-offline: external_ids %q, want v=2", got.ExternalIDs)
	}
}

// TestDisconnectsCounted: a server that goes away shows in the client's disconnection
// counter, under the prefix the component chose, and the client comes back.
func TestDisconnectsCounted(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	s := newStandalone(t, tl, shortTempDir(t), "nb")
	s.start()
	reg := prometheus.NewRegistry()
	c := newClient(t, s.unixRemote(), Config{Tables: allTables(), Metrics: reg, MetricsPrefix: "ovnt_test_nb"})
	disconnects := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "ovnt_test_nb_disconnects_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no ovnt_test_nb_disconnects_total among the registry's metrics")
		return 0
	}
	if n := disconnects(); n != 0 {
		t.Fatalf("%v disconnections counted on a fresh connection", n)
	}
	s.kill()
	poll.Eventually(t, context.Background(), "the disconnection counted", 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		n := disconnects()
		return n == 1, fmt.Errorf("%v disconnections counted, want 1", n)
	})
	s.start()
	insertSwitches(t, c, &testLS{Name: "after-restart"})
}

// cutShort is a server whose first connection attempt is refused with a certificate error
// and whose next ones hang until their context ends, as on a machine too busy to finish a
// dial before the caller's deadline.
type cutShort struct {
	client.Client // nil: only Connect and Connected are called
	attempts      int
}

func (c *cutShort) Connect(ctx context.Context) error {
	c.attempts++
	if c.attempts == 1 {
		return errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")
	}
	<-ctx.Done()
	return fmt.Errorf("dial tcp 127.0.0.1:6641: %w", ctx.Err())
}

func (c *cutShort) Connected() bool { return false }

// TestConnectReportsTheLastAttemptThatEnded: when the caller's deadline cuts an attempt
// short, the error names the previous attempt's failure, not the cut dial.
func TestConnectReportsTheLastAttemptThatEnded(t *testing.T) {
	c := &cutShort{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the second attempt starts after 250 ms
	defer cancel()
	err := connect(ctx, c, time.Minute, logr.Discard())
	want := "context deadline exceeded (last attempt: tls: failed to verify certificate: x509: certificate signed by unknown authority)"
	if err == nil || err.Error() != want || c.attempts != 2 {
		t.Errorf("after %d attempts: %v, want %q after 2", c.attempts, err, want)
	}
}
