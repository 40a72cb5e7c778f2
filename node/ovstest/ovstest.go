// Package ovstest serves an Open_vSwitch database from a real ovsdb-server for the tests of
// the node's OS-neutral code (the Windows host's included): the rows it leaves are read back
// with ovs-vsctl, the oracle.
package ovstest

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// DB is an empty Open_vSwitch database (one root row, as `ovs-vsctl init` leaves it).
type DB struct {
	t      testing.TB
	Remote string
}

// Start serves a database (ovsdbtest's, of the pinned schema) until the test ends.
func Start(t testing.TB) *DB {
	t.Helper()
	testenv.Require(t, "ovs-vsctl")
	d := &DB{t: t, Remote: ovsdbtest.Start(t, ovsdbtest.VSwitch).Remote}
	d.Vsctl("init")
	return d
}

// Vsctl runs ovs-vsctl against the database and fails the test on error.
func (d *DB) Vsctl(args ...string) string {
	d.t.Helper()
	out, err := d.TryVsctl(args...)
	if err != nil {
		d.t.Fatalf("ovs-vsctl %v: %v: %s", args, err, out)
	}
	return out
}

// TryVsctl runs ovs-vsctl and returns its trimmed output and error.
func (d *DB) TryVsctl(args ...string) (string, error) {
	out, err := exec.Command("ovs-vsctl", append([]string{"--db=" + d.Remote, "--no-wait", "--timeout=10"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Connect returns the agent's client of the database, closed when the test ends.
func (d *DB) Connect() *ovs.Switch {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sw, err := ovs.Connect(ctx, d.Remote, logr.Discard(), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(sw.Close)
	return sw
}

// FakeOVNController marks every interface whose external_ids name an iface-id as installed
// (ovn-installed=true), as ovn-controller does once it has bound the port, except the ones
// block returns true for (given the interface's name and iface-id); it stops when the test
// ends.
func (d *DB) FakeOVNController(block func(name, ifaceID string) bool) {
	d.every(50*time.Millisecond, func() {
		out, err := d.TryVsctl("--bare", "--columns=name", "find", "Interface", "external_ids:iface-id!=\"\"")
		if err != nil {
			return
		}
		for _, name := range strings.Fields(out) {
			id, _ := d.TryVsctl("--if-exists", "get", "Interface", name, "external_ids:iface-id")
			id = strings.Trim(id, `"`)
			if block != nil && block(name, id) {
				continue
			}
			inst, _ := d.TryVsctl("--if-exists", "get", "Interface", name, "external_ids:ovn-installed")
			if strings.Trim(inst, `"`) != "true" {
				d.TryVsctl("set", "Interface", name, "external_ids:ovn-installed=true")
			}
		}
	})
}

// every runs fn on a goroutine of its own every interval until the test ends (and waits
// for it then).
func (d *DB) every(interval time.Duration, fn func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fn()
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
}

// VSwitchd plays ovs-vswitchd for a model of the host's datapath (hnstest.Model.SyncOVS on
// Windows): it hands apply every interface in the database, name to type, every 20ms and
// whenever Sync is called, until the test ends.
type VSwitchd struct {
	d     *DB
	apply func(ifaces map[string]string)
	mu    sync.Mutex
}

// FakeVSwitchd starts a VSwitchd over apply.
func (d *DB) FakeVSwitchd(apply func(ifaces map[string]string)) *VSwitchd {
	v := &VSwitchd{d: d, apply: apply}
	d.every(20*time.Millisecond, func() { _ = v.sync() }) // a failed read is retried; Sync reports one
	return v
}

// Sync reads the interfaces now and applies them: when it returns, the model has seen every
// write made before the call (or the test has failed).
func (v *VSwitchd) Sync() {
	v.d.t.Helper()
	if err := v.sync(); err != nil {
		v.d.t.Errorf("fake ovs-vswitchd: %v", err)
	}
}

func (v *VSwitchd) sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	out, err := v.d.TryVsctl("--format=csv", "--data=bare", "--no-headings", "--columns=name,type", "list", "Interface")
	if err != nil {
		return fmt.Errorf("listing interfaces: %v: %s", err, out)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		return fmt.Errorf("reading %q: %w", out, err)
	}
	ifaces := map[string]string{}
	for _, r := range rows {
		if len(r) == 2 {
			ifaces[r[0]] = r[1]
		}
	}
	v.apply(ifaces)
	return nil
}
