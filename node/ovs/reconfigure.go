package ovs

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// KeyAttachedFor is the Open_vSwitch row's other_config key that names the vSwitch (on
// Windows the HNS network's ID) the node's ports were last added to the datapath for.
const KeyAttachedFor = "ovnt-attached-for"

// EnsureAttachedFor makes other_config:ovnt-attached-for of the Open_vSwitch row id, and
// reports whether it wrote. other_config is a column ovs-vswitchd reconfigures on (unlike
// external_ids, which it omits from its alerts: vswitchd/bridge.c bridge_init), and every
// reconfiguration tries again to add each interface that is not in the datapath. On
// Windows nothing else makes it try (its interface notifier is a stub): after a reboot,
// when the OVS services started before the vSwitch existed, a new value is what binds the
// ports again. Idempotent: the same id writes nothing.
func (s *Switch) EnsureAttachedFor(ctx context.Context, id string) (bool, error) {
	root, err := s.root(ctx)
	if err != nil {
		return false, err
	}
	if root.OtherConfig[KeyAttachedFor] == id {
		return false, nil
	}
	want := map[string]string{KeyAttachedFor: id}
	ops, err := s.c.Where(root).Mutate(root, setKeys(&root.OtherConfig, want)...)
	if err != nil {
		return false, err
	}
	return true, s.transact(ctx, "recording the vSwitch the ports are attached for", func() bool {
		r, err := s.root(ctx)
		return err == nil && r.OtherConfig[KeyAttachedFor] == id
	}, ops...)
}

// ManagerListening reports whether ovsdb-server serves the manager target (a Manager row
// of the Open_vSwitch row): it writes a passive target's status:bound_port every few
// seconds, and only for the targets it serves, which it does only when started with
// --remote=db:Open_vSwitch,Open_vSwitch,manager_options. It returns the port bound, or
// why not.
func (s *Switch) ManagerListening(ctx context.Context, target string) (int, error) {
	root, err := s.root(ctx)
	if err != nil {
		return 0, err
	}
	for _, uuid := range root.ManagerOptions {
		m := &vswitchd.Manager{UUID: uuid}
		if s.c.Get(ctx, m) != nil || m.Target != target {
			continue
		}
		p, ok := m.Status["bound_port"]
		if !ok {
			return 0, fmt.Errorf("ovsdb-server does not serve the manager %s (no status:bound_port): is it started with "+
				"--remote=db:Open_vSwitch,Open_vSwitch,manager_options?", target)
		}
		return strconv.Atoi(p)
	}
	return 0, fmt.Errorf("no manager %s in the database", target)
}
