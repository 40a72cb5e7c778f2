package conntrack

import (
	"context"
	"errors"
)

// ErrNotImplemented is New's answer on a system where the node cannot read or delete its
// datapath's conntrack entries.
var ErrNotImplemented = errors.New("cleaning the conntrack entries of UDP and SCTP Services is not implemented on this system")

// Datapath reads and deletes the node datapath's conntrack entries.
type Datapath interface {
	// Dump returns the UDP and SCTP entries of every zone.
	Dump(ctx context.Context) ([]Conn, error)
	// Delete removes c; an entry already gone is not an error.
	Delete(ctx context.Context, c Conn) error
}

// NewDatapath returns the Datapath of the ovs-vswitchd whose control socket is in rundir
// (Linux: <rundir>/ovs-vswitchd.ctl, else <rundir>/ovs-vswitchd.<pid>.ctl from its pidfile),
// or ErrNotImplemented.
func NewDatapath(rundir string) (Datapath, error) { return newDatapath(rundir) }
