package cniserver

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
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
		if err != nil {
			errs = append(errs, err)
		} else {
			s.log.Info("GC removed a stale pod interface", "container", ref.ContainerID, "ifname", ref.IfName, "port", ref.HostIfName)
		}
	}
	return errors.Join(errs...)
}
