package remotectl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// ReasonUnavailable is the reason of the Warning Event on a remote Node that gets no
// controller: a certificate file missing, or no InternalIP.
const ReasonUnavailable = "RemoteControllerUnavailable"

// Manager keeps a Supervisor's controllers in line with the cluster's remote Nodes.
type Manager struct {
	Kube     kubernetes.Interface
	Recorder record.EventRecorder
	// CertDir holds <node>.crt, <node>.key and ca.crt (the Secret ovnt-remote-chassis).
	CertDir string
	// Resync is how often every node is looked at again, so that a certificate added to the
	// directory after the node is found; zero: one minute.
	Resync     time.Duration
	Supervisor *Supervisor

	mu       sync.Mutex
	problems map[string]string // node: the last problem recorded as an Event
	synced   bool
}

// Run watches Nodes until ctx ends, then stops every controller and returns.
func (m *Manager) Run(ctx context.Context) error {
	defer m.Supervisor.StopAll()
	m.problems = map[string]string{}
	resync := m.Resync
	if resync == 0 {
		resync = time.Minute
	}
	f := informers.NewSharedInformerFactory(m.Kube, resync)
	inf := f.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.sync(obj) },
		UpdateFunc: func(_, obj any) { m.sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				m.forget(n.Name)
				m.Supervisor.Remove(n.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		m.mu.Lock()
		m.synced = true
		m.mu.Unlock()
	}
	<-ctx.Done()
	f.Shutdown()
	return nil
}

// Ready is nil once the nodes have been listed and every remote node that can have a
// controller has a running one.
func (m *Manager) Ready() error {
	m.mu.Lock()
	synced := m.synced
	m.mu.Unlock()
	if !synced {
		return errors.New("nodes not listed yet")
	}
	var waiting []string
	for node, pid := range m.Supervisor.Running() {
		if pid == 0 {
			waiting = append(waiting, node)
		}
	}
	if len(waiting) > 0 {
		slices.Sort(waiting)
		return fmt.Errorf("no running ovn-controller for %s", strings.Join(waiting, ", "))
	}
	return nil
}

// sync brings obj's controller in line with the node; a node that is remote but cannot have
// one gets an Event, and has none.
func (m *Manager) sync(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	spec, remote, err := Desired(n, m.CertDir)
	switch {
	case !remote:
		m.forget(n.Name)
		m.Supervisor.Remove(n.Name)
	case err != nil:
		m.Supervisor.Remove(n.Name)
		m.mu.Lock()
		seen := m.problems[n.Name] == err.Error()
		m.problems[n.Name] = err.Error()
		m.mu.Unlock()
		if !seen {
			m.Supervisor.cfg.Logger.Info("Warning: no controller for a remote chassis", "node", n.Name, "reason", err.Error())
			m.Recorder.Eventf(n, corev1.EventTypeWarning, ReasonUnavailable, "no ovn-controller for this remote chassis: %v", err)
		}
	default:
		m.forget(n.Name)
		m.Supervisor.Set(spec)
	}
}

func (m *Manager) forget(node string) {
	m.mu.Lock()
	delete(m.problems, node)
	m.mu.Unlock()
}
