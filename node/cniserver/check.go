package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
)

// checkAnnotationWait bounds CHECK's look-up of the pod's annotation, which a pod that went
// through ADD has.
const checkAnnotationWait = 5 * time.Second

// check verifies the attachment against the master's annotation: the interface in the pod's
// namespace with the pod's MAC, addresses and default routes, and its port on br-int bound
// to the pod's logical port (with the host ports the runtime asks for) and installed by
// ovn-controller.
func (s *Server) check(ctx context.Context, req cni.Request, conf cni.NetConf) error {
	if err := required(req, true); err != nil {
		return err
	}
	pod, err := cni.ParsePodArgs(req.Args)
	if err != nil {
		return err
	}
	defer s.locks.lock(req.ContainerID)()
	fail := func(err error) error {
		return fmt.Errorf("CHECK pod %s (container %s): %w", pod, req.ContainerID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, checkAnnotationWait)
	pn, uid, err := s.pods.Network(wctx, pod)
	cancel()
	if err != nil {
		return fail(err)
	}
	p := s.podInterface(req, pn)
	if err := s.host.CheckPodInterface(ctx, p); err != nil {
		return fail(err)
	}
	iface, ok := s.sw.Interface(ctx, p.HostIfName)
	if !ok {
		return fail(fmt.Errorf("no port %s on %s", p.HostIfName, s.cfg.Bridge))
	}
	var podIP netip.Addr
	if len(pn.IPs) > 0 {
		podIP = pn.IPs[0].Addr()
	}
	hps, err := s.hostPorts(conf.RuntimeConfig.PortMappings, podIP)
	if err != nil {
		return fail(err)
	}
	var errs []error
	for k, v := range portIDs(pod, uid, p, hps) {
		if iface.ExternalIDs[k] != v {
			errs = append(errs, fmt.Errorf("port %s has external_ids:%s=%q, want %q", p.HostIfName, k, iface.ExternalIDs[k], v))
		}
	}
	if !iface.Installed() {
		errs = append(errs, fmt.Errorf("ovn-controller has not installed port %s", p.HostIfName))
	}
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return nil
}
