package cniserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
)

// PodExists says whether the pod namespace/name with that UID is still this node's pod; an
// error means the answer is unknown and nothing is collected for it.
type PodExists func(ctx context.Context, namespace, name, uid string) (bool, error)

// LeakCollector is the agent's own garbage collector of pod attachments. Runtimes do not all
// call CNI GC (containerd 1.6 and 1.7 never do), and a DEL can be lost (a runtime that
// crashed, a node that was down when the pod was deleted), so the agent looks on a timer
// for ports whose pod is gone, and for host interfaces (HNS endpoints) without a port.
// Something is removed only when two passes in a row found it leaked, so an ADD in flight
// between creating an interface and its port, or a pod the API server is still creating,
// is never taken.
type LeakCollector struct {
	// Collected, if set, is told how many things each pass removed (metrics).
	Collected func(n int)
	s         *Server
	exists    PodExists

	mu       sync.Mutex
	ports    map[string]bool // host interface names of ports found leaked on the last pass
	ifaces   map[string]bool // host interfaces found without a port on the last pass
	interval time.Duration
}

// NewCollector returns a collector for s's attachments; exists decides whether a port's pod
// is gone.
func (s *Server) NewCollector(exists PodExists, interval time.Duration) *LeakCollector {
	return &LeakCollector{s: s, exists: exists, interval: interval, ports: map[string]bool{}, ifaces: map[string]bool{}}
}

// Run collects every interval until ctx ends.
func (c *LeakCollector) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := c.Collect(ctx)
		if c.Collected != nil && n > 0 {
			c.Collected(n)
		}
		if err != nil {
			c.s.log.Error(err, "collecting leaked pod attachments", "removed", n)
		} else if n > 0 {
			c.s.log.Info("collected leaked pod attachments", "removed", n)
		}
	}
}

// Collect runs one pass and returns how many ports and interfaces it removed.
func (c *LeakCollector) Collect(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ifaces, err := c.s.sw.InterfacesWith(ctx, KeyContainerID)
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	leaked := map[string]bool{}
	hasPort := map[string]bool{}
	for _, i := range ifaces {
		id := i.ExternalIDs
		ns, name, ok := strings.Cut(id[KeyPod], "/")
		if !ok || id[KeyIfaceIDVer] == "" {
			hasPort[i.Name] = true // not a port this agent attached: leave it
			continue
		}
		live, err := c.exists(ctx, ns, name, id[KeyIfaceIDVer])
		if err != nil || live {
			hasPort[i.Name] = true
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		leaked[i.Name] = true
		if !c.ports[i.Name] {
			hasPort[i.Name] = true // first sighting: next pass decides
			continue
		}
		ref := hostnet.PodRef{ContainerID: id[KeyContainerID], IfName: id[KeyIfName], Netns: id[KeySandbox], HostIfName: i.Name}
		unlock := c.s.locks.lock(ref.ContainerID)
		err = c.s.detach(ctx, ref)
		unlock()
		if err != nil {
			hasPort[i.Name] = true
			if !errors.Is(err, errInterfacePending) {
				errs = append(errs, err)
			}
			continue
		}
		removed++
		c.s.log.Info("removed the port of a pod that is gone", "pod", id[KeyPod], "uid", id[KeyIfaceIDVer], "port", i.Name, "container", ref.ContainerID)
	}
	c.ports = leaked
	if h, ok := c.s.host.(hostnet.Collector); ok {
		orphans := map[string]bool{}
		n, err := h.CollectPodInterfaces(ctx, func(name string) bool {
			if hasPort[name] {
				return true
			}
			orphans[name] = true
			return !c.ifaces[name]
		})
		removed += n
		errs = append(errs, err)
		c.ifaces = orphans
	}
	return removed, errors.Join(errs...)
}
