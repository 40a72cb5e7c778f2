package ovs

import (
	"context"
	"fmt"
	"time"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/utils/ptr"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// The listeners of a remote chassis (docs/remote-chassis.md): its ovn-controller runs on
// another host and reaches this node's database through a Manager row (ovsdb-server serves
// manager_options when started with --remote=db:Open_vSwitch,Open_vSwitch,manager_options,
// as ovs-ctl and the Windows service do) and br-int through a passive controller target.
//
// Both rows carry an inactivity probe: how long the connection may be silent before the
// node's daemon sends an echo, and then how long it waits for the answer before it drops
// the connection. OVS's default of 5 s is too short here. ovn-controller answers OpenFlow
// echoes in its main loop, which a full recompute blocks for seconds, and over a network
// every stall of either end counts. Each drop makes ovn-controller reconnect and reinstall
// every flow. A local ovn-controller's unix socket is never probed.

// probeMillis is probe as the inactivity_probe column holds it (milliseconds; nil: OVS's
// default).
func probeMillis(probe time.Duration) *int {
	if probe <= 0 {
		return nil
	}
	return ptr.To(int(probe.Milliseconds()))
}

// EnsureManager makes target ("pssl:6640") one of the database's manager_options: a Manager
// row with that target and inactivity probe probe (zero: OVS's default) referred to by the
// Open_vSwitch row. Idempotent; other managers are kept.
func (s *Switch) EnsureManager(ctx context.Context, target string, probe time.Duration) error {
	root, err := s.root(ctx)
	if err != nil {
		return err
	}
	want := probeMillis(probe)
	find := func(root *vswitchd.OpenvSwitch) *vswitchd.Manager {
		for _, uuid := range root.ManagerOptions {
			m := &vswitchd.Manager{UUID: uuid}
			if s.c.Get(ctx, m) == nil && m.Target == target {
				return m
			}
		}
		return nil
	}
	done := func() bool {
		r, err := s.root(ctx)
		if err != nil {
			return false
		}
		m := find(r)
		return m != nil && ptr.Equal(m.InactivityProbe, want)
	}
	if m := find(root); m != nil {
		if ptr.Equal(m.InactivityProbe, want) {
			return nil
		}
		m.InactivityProbe = want
		ops, err := s.c.Where(m).Update(m, &m.InactivityProbe)
		if err != nil {
			return err
		}
		return s.transact(ctx, "setting the inactivity probe of manager "+target, done, ops...)
	}
	// Manager is not a root table: the new row lives as long as the Open_vSwitch row refers
	// to it, so both go in one transaction.
	m := &vswitchd.Manager{UUID: "new_manager", Target: target, InactivityProbe: want}
	ops, err := s.c.Create(m)
	if err != nil {
		return err
	}
	ref, err := s.c.Where(root).Mutate(root, model.Mutation{Field: &root.ManagerOptions, Mutator: libovsdb.MutateOperationInsert, Value: []string{m.UUID}})
	if err != nil {
		return err
	}
	return s.transact(ctx, "adding manager "+target, done, append(ops, ref...)...)
}

// EnsureController makes target ("pssl:6653") the only controller of bridge, with inactivity
// probe probe (zero: OVS's default). Idempotent. Other controllers are replaced: on br-int,
// whose one client is ovn-controller, a target that is not ours is left over from an
// earlier configuration.
func (s *Switch) EnsureController(ctx context.Context, bridge, target string, probe time.Duration) error {
	br, err := s.bridge(ctx, bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	want := probeMillis(probe)
	only := func(br *vswitchd.Bridge) *vswitchd.Controller {
		if len(br.Controller) != 1 {
			return nil
		}
		c := &vswitchd.Controller{UUID: br.Controller[0]}
		if s.c.Get(ctx, c) != nil || c.Target != target {
			return nil
		}
		return c
	}
	done := func() bool {
		now, err := s.bridge(ctx, bridge)
		if err != nil {
			return false
		}
		c := only(now)
		return c != nil && ptr.Equal(c.InactivityProbe, want)
	}
	if c := only(br); c != nil {
		if ptr.Equal(c.InactivityProbe, want) {
			return nil
		}
		c.InactivityProbe = want
		ops, err := s.c.Where(c).Update(c, &c.InactivityProbe)
		if err != nil {
			return err
		}
		return s.transact(ctx, fmt.Sprintf("setting the inactivity probe of controller %s on %s", target, bridge), done, ops...)
	}
	c := &vswitchd.Controller{UUID: "new_controller", Target: target, InactivityProbe: want}
	ops, err := s.c.Create(c)
	if err != nil {
		return err
	}
	br.Controller = []string{c.UUID}
	set, err := s.c.Where(br).Update(br, &br.Controller)
	if err != nil {
		return err
	}
	return s.transact(ctx, fmt.Sprintf("setting controller %s on %s", target, bridge), done, append(ops, set...)...)
}

// RemoveSSL clears the Open_vSwitch row's ssl column (the row itself goes with its last
// reference) and reports whether there was one. Idempotent.
func (s *Switch) RemoveSSL(ctx context.Context) (bool, error) {
	root, err := s.root(ctx)
	if err != nil {
		return false, err
	}
	if root.SSL == nil {
		return false, nil
	}
	root.SSL = nil
	ops, err := s.c.Where(root).Update(root, &root.SSL)
	if err != nil {
		return false, err
	}
	return true, s.transact(ctx, "removing the SSL row", func() bool {
		r, err := s.root(ctx)
		return err == nil && r.SSL == nil
	}, ops...)
}
