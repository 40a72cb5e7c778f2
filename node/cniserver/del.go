package cniserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
)

// del disconnects the attachment: its port on br-int and its interface. It needs neither
// the pod nor its namespace, and succeeds when they, or the port, are gone already.
func (s *Server) del(ctx context.Context, req cni.Request) error {
	if err := required(req, false); err != nil {
		return err
	}
	defer s.locks.lock(req.ContainerID)()
	refs, err := s.attachments(ctx, req.ContainerID, req.IfName)
	if err != nil {
		return err
	}
	if req.IfName != "" {
		// Also the interface the name derives to, in case the port never made it to OVS.
		refs = appendRef(refs, hostnet.PodRef{ContainerID: req.ContainerID, IfName: req.IfName, Netns: req.Netns,
			HostIfName: hostnet.HostIfName(req.ContainerID, req.IfName)})
	}
	var errs []error
	for _, ref := range refs {
		// A pending removal is not DEL's failure: the runtime goes on, the collector
		// finishes it.
		if err := s.detach(ctx, ref); err != nil && !errors.Is(err, errInterfacePending) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("DEL container %s: %w", req.ContainerID, err)
	}
	return nil
}

// errInterfacePending: the host has not finished removing the interface, so its port
// stays (hostnet.InterfaceFirst); the leak collector finishes both.
var errInterfacePending = errors.New("the pod interface's removal has not finished")

// detach removes one attachment's port and interface, and the host ports the port
// recorded; the caller holds its container lock. On an InterfaceFirst host the interface
// goes first, and errInterfacePending says the port stays.
func (s *Server) detach(ctx context.Context, ref hostnet.PodRef) error {
	s.stopBinder(ref.HostIfName)
	iface, _ := s.sw.Interface(ctx, ref.HostIfName)
	first, ifaceFirst := s.host.(hostnet.InterfaceFirst)
	if ifaceFirst {
		if err := s.host.DeletePodInterface(ctx, ref); err != nil {
			return err
		}
		if exists, err := first.PodInterfaceExists(ctx, ref.HostIfName); err != nil || exists {
			return errInterfacePending
		}
	}
	if err := s.sw.DeletePort(ctx, ref.HostIfName); err != nil {
		return err
	}
	if iface.ExternalIDs[KeyHostPorts] != "" {
		if err := s.SyncHostPorts(ctx); err != nil {
			return err
		}
	}
	if ifaceFirst {
		return nil
	}
	return s.host.DeletePodInterface(ctx, ref)
}

// attachments lists the pod ports in the switch of containerID (all containers if empty),
// restricted to ifName if not empty.
func (s *Server) attachments(ctx context.Context, containerID, ifName string) ([]hostnet.PodRef, error) {
	ifaces, err := s.sw.InterfacesWith(ctx, KeyContainerID)
	if err != nil {
		return nil, err
	}
	var refs []hostnet.PodRef
	for _, i := range ifaces {
		id := i.ExternalIDs
		if (containerID != "" && id[KeyContainerID] != containerID) || (ifName != "" && id[KeyIfName] != ifName) {
			continue
		}
		refs = append(refs, hostnet.PodRef{ContainerID: id[KeyContainerID], IfName: id[KeyIfName], Netns: id[KeySandbox], HostIfName: i.Name})
	}
	return refs, nil
}

func appendRef(refs []hostnet.PodRef, r hostnet.PodRef) []hostnet.PodRef {
	for _, have := range refs {
		if have.HostIfName == r.HostIfName {
			return refs
		}
	}
	return append(refs, r)
}
