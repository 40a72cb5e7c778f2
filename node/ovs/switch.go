// Package ovs is the node agent's access to its local Open_vSwitch database, through
// libovsdb: the chassis settings ovn-controller reads, the bridges the node owns, and the
// ports of pods and of the management port. Every write is one transaction and is followed by
// a wait until the client's cache shows it, so a caller can read its own writes. Whether to
// write is decided on the cache: a change another client made a moment ago may not be in it
// yet, and is converged by the next call (the agent's periodic resync, or its restart).
package ovs

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// Switch is the node's local Open_vSwitch database.
type Switch struct {
	c client.Client

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every cache change
}

// Connect connects to the database at remote ("unix:/run/openvswitch/db.sock") and caches
// the columns the agent uses. It keeps trying until ctx is done. reg, if not nil, receives
// the client's counters (ovnt_node_ovsdb_disconnects_total and the monitor updates).
func Connect(ctx context.Context, remote string, logger logr.Logger, reg prometheus.Registerer) (*Switch, error) {
	var (
		ovs    vswitchd.OpenvSwitch
		br     vswitchd.Bridge
		port   vswitchd.Port
		iface  vswitchd.Interface
		ssl    vswitchd.SSL
		mgr    vswitchd.Manager
		ctl    vswitchd.Controller
		tables = []ovsdb.Table{
			{Model: &ovs, Fields: []interface{}{&ovs.Bridges, &ovs.ExternalIDs, &ovs.OtherConfig, &ovs.SSL, &ovs.ManagerOptions}},
			{Model: &ssl, Fields: []interface{}{&ssl.PrivateKey, &ssl.Certificate, &ssl.CaCert}},
			// A remote chassis' listeners (listener.go).
			// A Manager's status is rewritten every few seconds only while ovsdb-server
			// serves it (ManagerListening).
			{Model: &mgr, Fields: []interface{}{&mgr.Target, &mgr.InactivityProbe, &mgr.Status}},
			{Model: &ctl, Fields: []interface{}{&ctl.Target, &ctl.InactivityProbe}},
			{Model: &br, Fields: []interface{}{&br.Name, &br.Ports, &br.DatapathType, &br.FailMode, &br.OtherConfig, &br.Protocols, &br.Controller}},
			{Model: &port, Fields: []interface{}{&port.Name, &port.Interfaces, &port.ExternalIDs}},
			// Not the statistics: ovs-vswitchd rewrites them every few seconds, and every
			// change wakes up every waiter. ofport, which the gateway's rules name ports by,
			// is written when ovs-vswitchd adds the port (a restart usually keeps it).
			{Model: &iface, Fields: []interface{}{&iface.Name, &iface.Type, &iface.ExternalIDs, &iface.MAC, &iface.MTURequest, &iface.Error, &iface.Ofport, &iface.MACInUse}},
		}
	)
	dbModel, err := vswitchd.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	c, err := ovsdb.New(ctx, dbModel, ovsdb.Config{Remotes: remote, Tables: tables, Logger: logger, Metrics: reg, MetricsPrefix: "ovnt_node_ovsdb"})
	if err != nil {
		return nil, err
	}
	s := &Switch{c: c, changed: make(chan struct{})}
	notify := func(string) { s.signal() }
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { notify(table) },
		UpdateFunc: func(table string, _, _ model.Model) { notify(table) },
		DeleteFunc: func(table string, _ model.Model) { notify(table) },
	})
	return s, nil
}

// OnPortChange registers fn to be called after every change the cache sees in the Bridge,
// Port or Interface table, the rows a refill after a reconnection adds included (rows that
// went away meanwhile are purged without an event: callers re-read the cache periodically).
// fn runs on the cache's event goroutine and must not block; it should only enqueue work.
func (s *Switch) OnPortChange(fn func()) {
	onTable := func(table string) {
		switch table {
		case vswitchd.BridgeTable, vswitchd.PortTable, vswitchd.InterfaceTable:
			fn()
		}
	}
	s.c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { onTable(table) },
		UpdateFunc: func(table string, _, _ model.Model) { onTable(table) },
		DeleteFunc: func(table string, _ model.Model) { onTable(table) },
	})
}

// Close disconnects; call it at shutdown only.
func (s *Switch) Close() { s.c.Close() }

// Connected reports whether the client is connected now (it reconnects by itself).
func (s *Switch) Connected() bool { return s.c.CurrentEndpoint() != "" }

func (s *Switch) signal() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Switch) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Wait returns once cond, evaluated on the cache, is true, or with cond's last error (or
// ctx's) when ctx is done. cond runs again after every cache change, not on a timer.
func (s *Switch) Wait(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ch := s.changes() // before cond: a change between the two is not missed
		ok, err := cond()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// transact sends ops and waits until the cache satisfies done (what the ops wrote).
func (s *Switch) transact(ctx context.Context, what string, done func() bool, ops ...libovsdb.Operation) error {
	if _, err := ovsdb.Transact(ctx, s.c, ops...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.Wait(ctx, what+" in the cache", func() (bool, error) { return done(), nil })
}

// root returns the single Open_vSwitch row.
func (s *Switch) root(ctx context.Context) (*vswitchd.OpenvSwitch, error) {
	var rows []*vswitchd.OpenvSwitch
	if err := s.c.List(ctx, &rows); err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("the Open_vSwitch table has %d rows, want 1 (was `ovs-vsctl init` run?)", len(rows))
	}
	return rows[0], nil
}

// setKeys returns the mutation that makes the map column field of m hold kv's keys with
// kv's values, leaving the other keys: delete the keys, then insert them (an OVSDB map
// insert never overwrites an existing key).
func setKeys(field *map[string]string, kv map[string]string) []model.Mutation {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	return []model.Mutation{
		{Field: field, Mutator: libovsdb.MutateOperationDelete, Value: keys},
		{Field: field, Mutator: libovsdb.MutateOperationInsert, Value: kv},
	}
}

// missing returns the entries of want that have lacks or holds with another value.
func missing(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if have[k] != v {
			out[k] = v
		}
	}
	return out
}

func hasAll(have, want map[string]string) bool { return len(missing(have, want)) == 0 }
