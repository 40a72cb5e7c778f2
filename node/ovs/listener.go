package ovs

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// The listeners of a remote chassis (docs/remote-chassis.md): its ovn-controller runs on
// another host and reaches this node's database through a Manager row (ovsdb-server serves
// manager_options when started with --remote=db:Open_vSwitch,Open_vSwitch,manager_options,
// as ovs-ctl and the Windows service do) and br-int through a passive controller target.

// EnsureManager makes target ("pssl:6640") one of the database's manager_options: a Manager
// row with that target referred to by the Open_vSwitch row. Idempotent; other managers are
// kept.
func (s *Switch) EnsureManager(ctx context.Context, target string) error {
	root, err := s.root(ctx)
	if err != nil {
		return err
	}
	has := func(root *vswitchd.OpenvSwitch) bool {
		for _, uuid := range root.ManagerOptions {
			m := &vswitchd.Manager{UUID: uuid}
			if s.c.Get(ctx, m) == nil && m.Target == target {
				return true
			}
		}
		return false
	}
	if has(root) {
		return nil
	}
	// Manager is not a root table: the new row lives as long as the Open_vSwitch row refers
	// to it, so both go in one transaction.
	m := &vswitchd.Manager{UUID: "new_manager", Target: target}
	ops, err := s.c.Create(m)
	if err != nil {
		return err
	}
	ref, err := s.c.Where(root).Mutate(root, model.Mutation{Field: &root.ManagerOptions, Mutator: libovsdb.MutateOperationInsert, Value: []string{m.UUID}})
	if err != nil {
		return err
	}
	return s.transact(ctx, "adding manager "+target, func() bool {
		r, err := s.root(ctx)
		return err == nil && has(r)
	}, append(ops, ref...)...)
}

// EnsureController makes target ("pssl:6653") the only controller of bridge. Idempotent.
// Other controllers are replaced: on br-int, whose one client is ovn-controller, a target
// that is not ours is left over from an earlier configuration.
func (s *Switch) EnsureController(ctx context.Context, bridge, target string) error {
	br, err := s.bridge(ctx, bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	only := func(br *vswitchd.Bridge) bool {
		if len(br.Controller) != 1 {
			return false
		}
		c := &vswitchd.Controller{UUID: br.Controller[0]}
		return s.c.Get(ctx, c) == nil && c.Target == target
	}
	if only(br) {
		return nil
	}
	c := &vswitchd.Controller{UUID: "new_controller", Target: target}
	ops, err := s.c.Create(c)
	if err != nil {
		return err
	}
	br.Controller = []string{c.UUID}
	set, err := s.c.Where(br).Update(br, &br.Controller)
	if err != nil {
		return err
	}
	return s.transact(ctx, fmt.Sprintf("setting controller %s on %s", target, bridge), func() bool {
		now, err := s.bridge(ctx, bridge)
		return err == nil && only(now)
	}, append(ops, set...)...)
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
