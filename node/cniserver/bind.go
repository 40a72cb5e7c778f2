package cniserver

import (
	"context"
	"errors"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// Finishing a pod's port after ADD, on hosts whose pod interface appears only once the
// runtime has started the sandbox (hostnet.LateBinder, Windows): one worker per port waits
// for the interface, then gives the port the type the host names, retrying failures with
// a growing pause, for at most Config.BindTimeout. DEL of the port stops its worker first.

// binder is the worker finishing one port.
type binder struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startBinder starts the worker for ref's port unless one runs; the caller holds ref's
// container lock.
func (s *Server) startBinder(lb hostnet.LateBinder, ref hostnet.PodRef) {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	if s.binders[ref.HostIfName] != nil || s.bg.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.bg, s.cfg.BindTimeout)
	b := &binder{cancel: cancel, done: make(chan struct{})}
	s.binders[ref.HostIfName] = b
	go func() {
		defer close(b.done)
		defer cancel()
		s.bind(ctx, lb, ref)
		s.bmu.Lock()
		if s.binders[ref.HostIfName] == b {
			delete(s.binders, ref.HostIfName)
		}
		s.bmu.Unlock()
	}()
}

// stopBinder stops the worker of the port called name, if one runs, and returns once it
// has: after it, nothing changes the port behind the caller's back.
func (s *Server) stopBinder(name string) {
	s.bmu.Lock()
	b := s.binders[name]
	delete(s.binders, name)
	s.bmu.Unlock()
	if b != nil {
		b.cancel()
		<-b.done
	}
}

// bind waits for the pod's interface and sets its port's type.
func (s *Server) bind(ctx context.Context, lb hostnet.LateBinder, ref hostnet.PodRef) {
	start := time.Now()
	pause := 100 * time.Millisecond
	for {
		typ, err := lb.AwaitPodInterface(ctx, ref, s.cfg.MTU)
		if err == nil {
			err = s.sw.SetInterfaceType(ctx, ref.HostIfName, typ)
		}
		switch {
		case err == nil:
			s.log.V(2).Info("pod port bound to its interface", "port", ref.HostIfName, "container", ref.ContainerID,
				"type", typ, "took", time.Since(start).Round(time.Millisecond))
			return
		case errors.Is(err, ovs.ErrNoInterface):
			return // the port is gone (removed outside a DEL): nothing to finish
		case ctx.Err() != nil:
			if s.bg.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				s.log.Error(err, "the pod's interface did not appear; its port stays unbound", "port", ref.HostIfName,
					"container", ref.ContainerID, "waited", s.cfg.BindTimeout)
			}
			return
		}
		s.log.Info("finishing the pod's port failed; retrying", "port", ref.HostIfName, "error", err.Error(), "in", pause)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// ResumeBinders starts a worker for every pod port still of the empty type on a
// hostnet.LateBinder host: the ports whose worker an agent restart ended.
func (s *Server) ResumeBinders(ctx context.Context) error {
	lb, ok := s.host.(hostnet.LateBinder)
	if !ok {
		return nil
	}
	ifaces, err := s.sw.InterfacesWith(ctx, KeyContainerID)
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		if i.Type != "" {
			continue
		}
		id := i.ExternalIDs
		ref := hostnet.PodRef{ContainerID: id[KeyContainerID], IfName: id[KeyIfName], Netns: id[KeySandbox], HostIfName: i.Name}
		unlock := s.locks.lock(ref.ContainerID)
		s.startBinder(lb, ref)
		unlock()
	}
	return nil
}

// Close stops the workers finishing ports and waits for them.
func (s *Server) Close() {
	s.bgCancel()
	s.bmu.Lock()
	names := make([]string, 0, len(s.binders))
	for n := range s.binders {
		names = append(names, n)
	}
	s.bmu.Unlock()
	for _, n := range names {
		s.stopBinder(n)
	}
}
