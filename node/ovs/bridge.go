package ovs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// Bridge is a bridge the node owns.
type Bridge struct {
	Name         string
	DatapathType string // "system" or "netdev"
	// FailMode is "secure" or "standalone"; empty leaves OVS's default.
	FailMode string
	// OtherConfig keys to set; other keys are left alone.
	OtherConfig map[string]string
	// LocalMTU is the MTU requested for the bridge's own internal interface; 0 leaves it.
	LocalMTU int
	// Uplinks are existing network devices the bridge must hold as ports.
	Uplinks []string
	// Protocols are OpenFlow versions ("OpenFlow13") the bridge must allow; versions
	// already in the column are kept. Empty leaves the column alone.
	Protocols []string
}

// EnsureBridge creates the bridge, with its internal interface and b.Uplinks as ports, or
// brings an existing one to b's settings. Idempotent; an uplink that is a port of another
// bridge is an error, not moved.
func (s *Switch) EnsureBridge(ctx context.Context, b Bridge) error {
	existing, err := s.bridge(ctx, b.Name)
	if errors.Is(err, client.ErrNotFound) {
		err = s.createBridge(ctx, b)
		if err != nil {
			// ovn-controller creates br-int too: when it wins the race, our insert breaks
			// the unique bridge name, and the bridge is there to be brought to b's settings.
			if other, werr := s.awaitBridge(ctx, b.Name, 2*time.Second); werr == nil {
				err = s.updateBridge(ctx, other, b)
			}
		}
	} else if err == nil {
		err = s.updateBridge(ctx, existing, b)
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	for _, up := range b.Uplinks {
		if _, err := s.EnsurePort(ctx, b.Name, Port{Name: up}); err != nil {
			return err
		}
	}
	return nil
}

// awaitBridge returns the bridge called name once the cache has it, waiting at most wait.
func (s *Switch) awaitBridge(ctx context.Context, name string, wait time.Duration) (*vswitchd.Bridge, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var br *vswitchd.Bridge
	err := s.Wait(ctx, "bridge "+name, func() (bool, error) {
		var err error
		br, err = s.bridge(ctx, name)
		return err == nil, err
	})
	return br, err
}

func (s *Switch) createBridge(ctx context.Context, b Bridge) error {
	root, err := s.root(ctx)
	if err != nil {
		return err
	}
	// Named UUIDs tie the rows of one transaction together; a bridge is a root row holding
	// its local port, which has an internal interface of the bridge's name.
	iface := &vswitchd.Interface{UUID: "local_iface", Name: b.Name, Type: "internal"}
	if b.LocalMTU > 0 {
		iface.MTURequest = &b.LocalMTU
	}
	port := &vswitchd.Port{UUID: "local_port", Name: b.Name, Interfaces: []string{iface.UUID}}
	br := &vswitchd.Bridge{UUID: "new_bridge", Name: b.Name, Ports: []string{port.UUID},
		DatapathType: b.DatapathType, OtherConfig: b.OtherConfig, Protocols: b.Protocols}
	if b.FailMode != "" {
		br.FailMode = &b.FailMode
	}
	ops, err := s.c.Create(iface, port, br)
	if err != nil {
		return err
	}
	add, err := s.c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: libovsdb.MutateOperationInsert, Value: []string{br.UUID}})
	if err != nil {
		return err
	}
	return s.transact(ctx, "creating bridge "+b.Name, func() bool {
		_, err := s.bridge(ctx, b.Name)
		return err == nil
	}, append(ops, add...)...)
}

func (s *Switch) updateBridge(ctx context.Context, have *vswitchd.Bridge, b Bridge) error {
	var ops []libovsdb.Operation
	var fields []interface{}
	if have.DatapathType != b.DatapathType {
		have.DatapathType = b.DatapathType
		fields = append(fields, &have.DatapathType)
	}
	if b.FailMode != "" && (have.FailMode == nil || *have.FailMode != b.FailMode) {
		have.FailMode = &b.FailMode
		fields = append(fields, &have.FailMode)
	}
	if len(fields) > 0 {
		up, err := s.c.Where(have).Update(have, fields...)
		if err != nil {
			return err
		}
		ops = append(ops, up...)
	}
	if diff := missing(have.OtherConfig, b.OtherConfig); len(diff) > 0 {
		mut, err := s.c.Where(have).Mutate(have, setKeys(&have.OtherConfig, diff)...)
		if err != nil {
			return err
		}
		ops = append(ops, mut...)
	}
	if add := missingItems(have.Protocols, b.Protocols); len(add) > 0 {
		mut, err := s.c.Where(have).Mutate(have, model.Mutation{Field: &have.Protocols, Mutator: libovsdb.MutateOperationInsert, Value: add})
		if err != nil {
			return err
		}
		ops = append(ops, mut...)
	}
	if len(ops) == 0 {
		return nil
	}
	return s.transact(ctx, "updating bridge "+b.Name, func() bool {
		now, err := s.bridge(ctx, b.Name)
		return err == nil && now.DatapathType == b.DatapathType && hasAll(now.OtherConfig, b.OtherConfig) &&
			(b.FailMode == "" || (now.FailMode != nil && *now.FailMode == b.FailMode)) &&
			len(missingItems(now.Protocols, b.Protocols)) == 0
	}, ops...)
}

// missingItems returns the items of want that have lacks.
func missingItems(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

// bridge returns the cached bridge called name, or client.ErrNotFound.
func (s *Switch) bridge(ctx context.Context, name string) (*vswitchd.Bridge, error) {
	b := &vswitchd.Bridge{Name: name}
	if err := s.c.Get(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// bridgeOfPort returns the bridge holding the port with UUID portUUID, or nil.
func (s *Switch) bridgeOfPort(ctx context.Context, portUUID string) *vswitchd.Bridge {
	var bridges []*vswitchd.Bridge
	if err := s.c.List(ctx, &bridges); err != nil {
		return nil
	}
	for _, b := range bridges {
		if slices.Contains(b.Ports, portUUID) {
			return b
		}
	}
	return nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}
