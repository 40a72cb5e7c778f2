// Package ovstest serves an Open_vSwitch database from a real ovsdb-server for the tests of
// the node's OS-neutral code (the Windows host's included): the rows it leaves are read back
// with ovs-vsctl, the oracle.
package ovstest

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
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

// Start serves a database (ovsdbtest's, of the pinned schema) until the test ends, with
// ovsdb-server's further options args (hnstest.OVSDBServerArgs: a Windows node's).
func Start(t testing.TB, args ...string) *DB {
	t.Helper()
	testenv.Require(t, "ovs-vsctl")
	d := &DB{t: t, Remote: ovsdbtest.StartArgs(t, ovsdbtest.VSwitch, args...).Remote}
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

// VSwitchd plays ovs-vswitchd for a model of the host's datapath (hnstest.Model on
// Windows): every 20ms, and whenever Sync is called, it reads the database, hands the model
// every interface (name to type) and whether a column ovs-vswitchd is alerted on changed
// since its last read, and writes back what the model says ovs-vswitchd writes into each
// Interface row (ofport, error, mac_in_use), until the test ends.
type VSwitchd struct {
	d    *DB
	dp   Datapath
	mu   sync.Mutex
	last string // the alerting columns at the last read
}

// Datapath is the model of the host's datapath ovs-vswitchd drives.
type Datapath interface {
	// Reconfigure is ovs-vswitchd reading its database: ifaces are the interfaces in it,
	// changed says whether a column it is alerted on changed since the last call. It
	// returns the status of every interface it knows.
	Reconfigure(ifaces map[string]string, changed bool) map[string]IfaceStatus
}

// IfaceStatus is what ovs-vswitchd writes into an Interface row.
type IfaceStatus struct {
	OFPort   int // -1: not in the datapath
	Error    string
	MACInUse string
}

// FakeVSwitchd starts a VSwitchd over dp.
func (d *DB) FakeVSwitchd(dp Datapath) *VSwitchd {
	v := &VSwitchd{d: d, dp: dp}
	d.every(20*time.Millisecond, func() { _ = v.sync() }) // a failed read is retried; Sync reports one
	return v
}

// Sync reads the database now and applies it: when it returns, the model has seen every
// write made before the call (or the test has failed).
func (v *VSwitchd) Sync() {
	v.d.t.Helper()
	if err := v.sync(); err != nil {
		v.d.t.Errorf("fake ovs-vswitchd: %v", err)
	}
}

// alerting are the columns of each table whose change makes ovs-vswitchd reconfigure (a
// subset: the ones this project writes). external_ids and what ovs-vswitchd writes itself
// (ofport, error, mac_in_use, status) are omitted from its alerts (vswitchd/bridge.c
// bridge_init), so they are not read here.
var alerting = []string{
	"--columns=name,type,options,other_config,mtu_request,mac,ofport,error,mac_in_use", "list", "Interface", "--",
	"--columns=name,interfaces,other_config", "list", "Port", "--",
	"--columns=name,ports,other_config,fail_mode,datapath_type,controller,protocols", "list", "Bridge", "--",
	"--columns=bridges,other_config,ssl,manager_options", "list", "Open_vSwitch",
}

func (v *VSwitchd) sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	out, err := v.d.TryVsctl(append([]string{"--format=csv", "--data=bare", "--no-headings"}, alerting...)...)
	if err != nil {
		return fmt.Errorf("reading the database: %v: %s", err, out)
	}
	ifaceRows, rest, _ := strings.Cut(out, "\n\n")
	r := csv.NewReader(strings.NewReader(ifaceRows))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return fmt.Errorf("reading %q: %w", ifaceRows, err)
	}
	ifaces := map[string]string{}
	have := map[string]IfaceStatus{}
	var config strings.Builder
	for _, r := range rows {
		if len(r) != 9 {
			continue
		}
		ifaces[r[0]] = r[1]
		port, _ := strconv.Atoi(r[6]) // "" (never written): 0
		have[r[0]] = IfaceStatus{OFPort: port, Error: r[7], MACInUse: r[8]}
		config.WriteString(strings.Join(r[:6], ",") + "\n")
	}
	config.WriteString(rest)
	changed := config.String() != v.last
	v.last = config.String()
	for name, st := range v.dp.Reconfigure(ifaces, changed) {
		if have[name] == st {
			continue
		}
		args := []string{"--if-exists", "set", "Interface", name, fmt.Sprintf("ofport=%d", st.OFPort),
			fmt.Sprintf("error=%q", st.Error), fmt.Sprintf("mac_in_use=%q", st.MACInUse)}
		if st.Error == "" {
			args[5] = "error=[]"
		}
		if st.MACInUse == "" {
			args[6] = "mac_in_use=[]"
		}
		if out, err := v.d.TryVsctl(args...); err != nil {
			return fmt.Errorf("writing the status of %s: %v: %s", name, err, out)
		}
	}
	return nil
}
