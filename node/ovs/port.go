package ovs

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// KeyInstalled is the Interface external_ids key ovn-controller sets to "true" once the
// port is bound to this chassis and its flows are installed in br-int.
const KeyInstalled = "ovn-installed"

// Port is a bridge port with one interface of the same name (all the node makes).
type Port struct {
	Name string
	// Type is the Interface type: "" for an existing network device (a veth end),
	// "internal" for a device OVS creates.
	Type string
	// ExternalIDs are set on the Interface, where ovn-controller reads iface-id; other
	// keys (ovn-installed) are left alone.
	ExternalIDs map[string]string
	// MAC is the Interface's requested MAC (internal interfaces only); "" leaves it.
	MAC string
	// MTURequest is the MTU OVS gives the device; 0 leaves it.
	MTURequest int
}

// EnsurePort adds the port to bridge, or brings the existing port's interface to p's
// settings, and reports whether it created the port. Idempotent. A port of that name on
// another bridge is an error.
func (s *Switch) EnsurePort(ctx context.Context, bridge string, p Port) (created bool, err error) {
	br, err := s.bridge(ctx, bridge)
	if err != nil {
		return false, fmt.Errorf("port %s: bridge %s: %w", p.Name, bridge, err)
	}
	existing := &vswitchd.Port{Name: p.Name}
	err = s.c.Get(ctx, existing)
	if errors.Is(err, client.ErrNotFound) {
		return true, s.createPort(ctx, br, p)
	}
	if err != nil {
		return false, fmt.Errorf("port %s: %w", p.Name, err)
	}
	if holder := s.bridgeOfPort(ctx, existing.UUID); holder == nil || holder.Name != bridge {
		return false, fmt.Errorf("port %s exists but not on bridge %s", p.Name, bridge)
	}
	return false, s.updateInterface(ctx, p)
}

func (s *Switch) createPort(ctx context.Context, br *vswitchd.Bridge, p Port) error {
	iface := &vswitchd.Interface{UUID: "new_iface", Name: p.Name, Type: p.Type, ExternalIDs: p.ExternalIDs}
	if p.MAC != "" {
		iface.MAC = &p.MAC
	}
	if p.MTURequest > 0 {
		iface.MTURequest = &p.MTURequest
	}
	port := &vswitchd.Port{UUID: "new_port", Name: p.Name, Interfaces: []string{iface.UUID}}
	ops, err := s.c.Create(iface, port)
	if err != nil {
		return err
	}
	add, err := s.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: libovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		return err
	}
	return s.transact(ctx, fmt.Sprintf("adding port %s to %s", p.Name, br.Name), func() bool {
		_, ok := s.Interface(ctx, p.Name)
		return ok
	}, append(ops, add...)...)
}

func (s *Switch) updateInterface(ctx context.Context, p Port) error {
	have := &vswitchd.Interface{Name: p.Name}
	if err := s.c.Get(ctx, have); err != nil {
		return fmt.Errorf("interface %s: %w", p.Name, err)
	}
	var fields []interface{}
	if have.Type != p.Type {
		have.Type = p.Type
		fields = append(fields, &have.Type)
	}
	if p.MAC != "" && (have.MAC == nil || *have.MAC != p.MAC) {
		have.MAC = &p.MAC
		fields = append(fields, &have.MAC)
	}
	if p.MTURequest > 0 && (have.MTURequest == nil || *have.MTURequest != p.MTURequest) {
		have.MTURequest = &p.MTURequest
		fields = append(fields, &have.MTURequest)
	}
	var ops []libovsdb.Operation
	if len(fields) > 0 {
		up, err := s.c.Where(have).Update(have, fields...)
		if err != nil {
			return err
		}
		ops = append(ops, up...)
	}
	if diff := missing(have.ExternalIDs, p.ExternalIDs); len(diff) > 0 {
		mut, err := s.c.Where(have).Mutate(have, setKeys(&have.ExternalIDs, diff)...)
		if err != nil {
			return err
		}
		ops = append(ops, mut...)
	}
	if len(ops) == 0 {
		return nil
	}
	return s.transact(ctx, "updating interface "+p.Name, func() bool {
		now, ok := s.Interface(ctx, p.Name)
		return ok && now.Type == p.Type && hasAll(now.ExternalIDs, p.ExternalIDs) &&
			(p.MAC == "" || now.MAC == p.MAC)
	}, ops...)
}

// ErrNoInterface: the interface is not in the database.
var ErrNoInterface = errors.New("no such interface")

// SetInterfaceType gives the existing interface called name the type typ. Unlike
// EnsurePort it never creates anything: ErrNoInterface (wrapped) if the interface is gone.
// Idempotent.
func (s *Switch) SetInterfaceType(ctx context.Context, name, typ string) error {
	have := &vswitchd.Interface{Name: name}
	if err := s.c.Get(ctx, have); errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("interface %s: %w", name, ErrNoInterface)
	} else if err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	if have.Type == typ {
		return nil
	}
	have.Type = typ
	ops, err := s.c.Where(have).Update(have, &have.Type)
	if err != nil {
		return err
	}
	return s.transact(ctx, fmt.Sprintf("setting the type of interface %s to %q", name, typ), func() bool {
		now, ok := s.Interface(ctx, name)
		return !ok || now.Type == typ
	}, ops...)
}

// DeletePort removes the port called name from whichever bridge holds it; OVSDB then
// garbage-collects the Port and Interface rows. Idempotent: nil if there is no such port.
func (s *Switch) DeletePort(ctx context.Context, name string) error {
	port := &vswitchd.Port{Name: name}
	if err := s.c.Get(ctx, port); errors.Is(err, client.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("port %s: %w", name, err)
	}
	br := s.bridgeOfPort(ctx, port.UUID)
	if br == nil {
		return nil // unreferenced: the server has collected it already
	}
	ops, err := s.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: libovsdb.MutateOperationDelete, Value: []string{port.UUID}})
	if err != nil {
		return err
	}
	return s.transact(ctx, fmt.Sprintf("removing port %s from %s", name, br.Name), func() bool {
		return errors.Is(s.c.Get(ctx, &vswitchd.Port{Name: name}), client.ErrNotFound)
	}, ops...)
}

// Interface is a cached interface row, as the agent reads it.
type Interface struct {
	Name        string
	Type        string
	ExternalIDs map[string]string
	MAC         string // requested MAC ("" if none)
	Error       string // why OVS could not open the device, if it could not
	// OFPort is the OpenFlow port number ovs-vswitchd assigned: 0 while it has not (yet),
	// -1 if it could not add the interface.
	OFPort int
	// MACInUse is the MAC of the device ovs-vswitchd opened for it (on Windows, of the
	// Hyper-V port it bound): "" while it has opened none.
	MACInUse string
}

// Installed reports whether ovn-controller has bound the interface and installed its flows.
func (i Interface) Installed() bool { return i.ExternalIDs[KeyInstalled] == "true" }

func fromModel(m *vswitchd.Interface) Interface {
	i := Interface{Name: m.Name, Type: m.Type, ExternalIDs: cloneMap(m.ExternalIDs)}
	if m.MAC != nil {
		i.MAC = *m.MAC
	}
	if m.Error != nil {
		i.Error = *m.Error
	}
	if m.Ofport != nil {
		i.OFPort = *m.Ofport
	}
	if m.MACInUse != nil {
		i.MACInUse = *m.MACInUse
	}
	return i
}

// Interface returns the cached interface called name.
func (s *Switch) Interface(ctx context.Context, name string) (Interface, bool) {
	m := &vswitchd.Interface{Name: name}
	if err := s.c.Get(ctx, m); err != nil {
		return Interface{}, false
	}
	return fromModel(m), true
}

// InterfacesWith returns the cached interfaces whose external_ids have key.
func (s *Switch) InterfacesWith(ctx context.Context, key string) ([]Interface, error) {
	var rows []*vswitchd.Interface
	err := s.c.WhereCache(func(i *vswitchd.Interface) bool {
		_, ok := i.ExternalIDs[key]
		return ok
	}).List(ctx, &rows)
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(rows))
	for _, r := range rows {
		out = append(out, fromModel(r))
	}
	return out, nil
}

// BridgePort is a cached port of a bridge, with its interfaces.
type BridgePort struct {
	Name string
	// ExternalIDs of the Port row: where ovn-controller marks the patch ports it makes
	// (ovn-localnet-port, ovn-l3gateway-port, ...), unlike the Interface rows.
	ExternalIDs map[string]string
	Interfaces  []Interface
}

// BridgePorts returns the cached ports of bridge, its own internal port included, or
// client.ErrNotFound (wrapped) if there is no such bridge.
func (s *Switch) BridgePorts(ctx context.Context, bridge string) ([]BridgePort, error) {
	br, err := s.bridge(ctx, bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	out := make([]BridgePort, 0, len(br.Ports))
	for _, pu := range br.Ports {
		port := &vswitchd.Port{UUID: pu}
		if err := s.c.Get(ctx, port); err != nil {
			continue // a reference the cache has not caught up with
		}
		bp := BridgePort{Name: port.Name, ExternalIDs: cloneMap(port.ExternalIDs)}
		for _, iu := range port.Interfaces {
			m := &vswitchd.Interface{UUID: iu}
			if err := s.c.Get(ctx, m); err == nil {
				bp.Interfaces = append(bp.Interfaces, fromModel(m))
			}
		}
		out = append(out, bp)
	}
	return out, nil
}
