package cniserver

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
)

// gc removes every pod port and interface whose attachment is not among the runtime's
// valid attachments: what a crash between ADD and the runtime's bookkeeping, or a DEL that
// never came, left behind.
func (s *Server) gc(ctx context.Context, conf cni.NetConf) error {
	valid := map[types.GCAttachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[a] = true
	}
	refs, err := s.attachments(ctx, "", "")
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range refs {
		if valid[types.GCAttachment{ContainerID: ref.ContainerID, IfName: ref.IfName}] {
			continue
		}
		unlock := s.locks.lock(ref.ContainerID)
		err := s.detach(ctx, ref)
		unlock()
		switch {
		case errors.Is(err, errInterfacePending): // the next GC, or the collector, finishes it
		case err != nil:
			errs = append(errs, err)
		default:
			s.log.Info("GC removed a stale pod interface", "container", ref.ContainerID, "ifname", ref.IfName, "port", ref.HostIfName)
		}
	}
	if c, ok := s.host.(hostnet.Collector); ok {
		// Interfaces whose port is gone already (a DEL that removed the port and then
		// gave up on the interface) are only found by the host itself.
		keep := map[string]bool{}
		for a := range valid {
			keep[hostnet.HostIfName(a.ContainerID, a.IfName)] = true
		}
		_, err := c.CollectPodInterfaces(ctx, func(name string) bool { return keep[name] })
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
