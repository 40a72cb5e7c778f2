package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/pods"
)

// rollbackTimeout bounds the undoing of a failed ADD, which runs even when the request's
// context is done (the runtime gave up waiting).
const rollbackTimeout = 30 * time.Second

// add connects the pod: its interface, its port on br-int, and ovn-controller's go-ahead.
// A repeated ADD finds everything in place, creates nothing and returns the same result.
func (s *Server) add(ctx context.Context, req cni.Request, conf cni.NetConf) ([]byte, error) {
	if err := required(req, true); err != nil {
		return nil, err
	}
	if req.Netns == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is empty", "")
	}
	pod, err := cni.ParsePodArgs(req.Args)
	if err != nil {
		return nil, err
	}
	defer s.locks.lock(req.ContainerID)()
	fail := func(err error) error {
		return fmt.Errorf("ADD pod %s (container %s): %w", pod, req.ContainerID, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, s.cfg.AnnotationTimeout)
	pn, uid, err := s.pods.Network(waitCtx, pod)
	cancel()
	if errors.Is(err, pods.ErrNotFound) {
		return nil, fail(types.NewError(types.ErrUnknownContainer, err.Error(), ""))
	}
	if err != nil {
		return nil, fail(err)
	}
	p := s.podInterface(req, pn)
	if d := conf.RuntimeConfig.DNS; d != nil {
		p.DNS = podDNS(d)
	}
	var podIP netip.Addr
	if len(pn.IPs) > 0 {
		podIP = pn.IPs[0].Addr()
	}
	hps, err := s.hostPorts(conf.RuntimeConfig.PortMappings, podIP)
	if err != nil {
		return nil, fail(err)
	}
	att, err := s.attach(ctx, pod, uid, p, hps)
	if err != nil {
		return nil, fail(err)
	}
	if len(hps) > 0 {
		// The runtime DELs a failed ADD, and DEL takes the port and its host ports away.
		if err := s.SyncHostPorts(ctx); err != nil {
			return nil, fail(err)
		}
	}
	out, err := result(conf.CNIVersion, p, att)
	if err != nil {
		return nil, fail(err)
	}
	return out, nil
}

func (s *Server) podInterface(req cni.Request, pn contract.PodNetwork) hostnet.PodInterface {
	return hostnet.PodInterface{
		PodRef: hostnet.PodRef{
			ContainerID: req.ContainerID,
			Netns:       req.Netns,
			IfName:      req.IfName,
			HostIfName:  hostnet.HostIfName(req.ContainerID, req.IfName),
		},
		MAC:      pn.MAC,
		IPs:      pn.IPs,
		Gateways: pn.Gateways,
		Routes:   pn.Routes,
		MTU:      s.cfg.MTU,
	}
}

// attach makes the interface and the port and waits for ovn-controller; on failure it
// undoes what this call created (and only that: a repeated ADD leaves the first one's work).
// On a hostnet.LateBinder host (Windows) the pod's interface does not exist before ADD
// returns, so neither can ovn-controller bind the port: attach creates the port without a
// type, returns without waiting, and leaves the rest to a worker (bind.go).
func (s *Server) attach(ctx context.Context, pod cni.PodArgs, uid string, p hostnet.PodInterface, hps []hostPort) (hostnet.Attached, error) {
	lb, late := s.host.(hostnet.LateBinder)
	if late {
		// A repeated ADD while the worker runs: stop it so that it does not change the
		// port under this call, and start it again below.
		s.stopBinder(p.HostIfName)
	}
	success := false
	att, err := s.host.CreatePodInterface(ctx, p)
	if err != nil {
		return att, fmt.Errorf("pod interface: %w", err)
	}
	defer func() {
		if !success && att.Created {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if err := s.host.DeletePodInterface(rctx, p.PodRef); err != nil {
				s.log.Error(err, "rolling back the pod interface", "pod", pod.String())
			}
		}
	}()
	port := ovs.Port{Name: att.HostIfName, ExternalIDs: portIDs(pod, uid, p, hps)}
	if have, ok := s.sw.Interface(ctx, att.HostIfName); ok && late {
		// The worker of an earlier ADD may have finished: keep the type it set (taking
		// it away would make OVS delete the Hyper-V port of the name, the pod's vNIC).
		port.Type = have.Type
	}
	portCreated, err := s.sw.EnsurePort(ctx, s.cfg.Bridge, port)
	if err != nil {
		return att, err
	}
	defer func() {
		if !success && portCreated {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if err := s.sw.DeletePort(rctx, att.HostIfName); err != nil {
				s.log.Error(err, "rolling back the OVS port", "pod", pod.String())
			}
		}
	}()
	if late {
		success = true
		s.startBinder(lb, p.PodRef)
		return att, nil
	}
	// Until ovn-controller has bound the port and installed its flows, the pod's packets
	// are dropped; a pod that starts before that fails its first connections.
	instCtx, cancel := context.WithTimeout(ctx, s.cfg.InstallTimeout)
	defer cancel()
	written := time.Now()
	err = s.sw.Wait(instCtx, "ovn-controller to install port "+att.HostIfName, func() (bool, error) {
		iface, ok := s.sw.Interface(instCtx, att.HostIfName)
		if !ok {
			return false, fmt.Errorf("port %s is gone", att.HostIfName)
		}
		if iface.Error != "" {
			return false, fmt.Errorf("OVS cannot use %s: %s", att.HostIfName, iface.Error)
		}
		return iface.Installed(), nil
	})
	if err != nil {
		return att, types.NewError(types.ErrTryAgainLater, err.Error(),
			fmt.Sprintf("is logical switch port %s in the NB and ovn-controller connected?", contract.PodPort(pod.Namespace, pod.Name)))
	}
	if portCreated && s.cfg.Installed != nil {
		s.cfg.Installed(time.Since(written))
	}
	success = true
	return att, nil
}

// portIDs are the external_ids of the pod's interface in the switch.
func portIDs(pod cni.PodArgs, uid string, p hostnet.PodInterface, hps []hostPort) map[string]string {
	ids := map[string]string{
		KeyIfaceID:     contract.PodPort(pod.Namespace, pod.Name),
		KeyAttachedMAC: p.MAC.String(),
		KeyContainerID: p.ContainerID,
		KeyIfName:      p.IfName,
		KeySandbox:     p.Netns,
		KeyPod:         pod.String(),
	}
	if uid != "" {
		ids[KeyIfaceIDVer] = uid
	}
	if len(hps) > 0 {
		b, _ := json.Marshal(hps) // plain values: cannot fail
		ids[KeyHostPorts] = string(b)
	}
	return ids
}

// podDNS converts the runtime's "dns" capability; a server that is not an address is
// dropped (the runtime validated them; the pod keeps the others).
func podDNS(d *cni.RuntimeDNS) hostnet.DNS {
	out := hostnet.DNS{Search: d.Searches}
	for _, s := range d.Servers {
		if a, err := netip.ParseAddr(s); err == nil {
			out.Servers = append(out.Servers, a)
		}
	}
	return out
}
