package controller

// What a kind's reconciler is given and what it returns. The runtime (runtime.go) owns the
// queue and the NB writes; a reconciler only reads caches, allocates, and says which rows
// its keys want and which other keys a change affects.

import (
	"context"
	"slices"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// reconciler is one kind's part of the controller. The runtime calls it from several
// workers at once. The queue never syncs one key twice at the same time, but a key that
// another needs first (desire.syncFirst) is synced inline by that key's worker.
type reconciler interface {
	// kind is the owner kind of its keys.
	kind() nb.Kind
	// keys lists the key of every object of the kind that exists, for start-up and resync.
	// Owners found only in the NB are added by the runtime (their sync deletes their rows).
	keys() ([]string, error)
	// desired returns what key wants of the NB; for an object that is gone, no rows. A
	// read error is returned, never turned into "no rows". Allocations (subnets, addresses,
	// their annotations) happen here, before the rows that use them exist.
	desired(ctx context.Context, key string) (desire, error)
}

// desire is what one key wants of the NB.
type desire struct {
	// rows are every row the key should own; none deletes all it owns.
	rows []nb.Row
	// keep means keep the rows the key has: apply nothing and retry nothing, the key's
	// input is unusable (an Event says why) and the rows it has may still serve.
	keep bool
	// syncFirst are keys whose rows these rows name without a reference column (an ACL
	// match names an address set), so nb.Diff cannot wait for them: they are synced first.
	syncFirst []nb.Key
	// afterCommit, if set, runs once rows are in the NB, with the plan that put them there
	// (possibly empty), and returns the keys the change affects: the runtime enqueues them.
	// Allocations are freed here, after the rows that used them are gone.
	afterCommit func(plan *nb.Plan) ([]nb.Key, error)
}

// exclusive is a reconciler whose keys of one group must not sync at the same time: a sync
// that decides the order of its writes from another key's rows (see handOver) must not race
// a sync of that key computed from older input. The runtime holds the group's lock for a
// key's sync and the syncs it runs inline; keys of different groups still run in parallel.
type exclusive interface {
	group(key string) string
}

// primer is a reconciler with in-memory state to fill from the caches (and the NB's)
// before any sync. The kinds are primed in the order of Controller.kinds.
type primer interface {
	prime(ctx context.Context) error
}

// globalWatcher is a reconciler that watches the one NB_Global row: the runtime calls it
// with the row found at start (old nil) and with every change.
type globalWatcher interface {
	globalChanged(old, cur model.Model)
}

// rowWatcher is a reconciler some of whose keys depend on rows that other keys create: it
// returns the keys a new NB row affects (besides the row's owner, which the runtime enqueues).
type rowWatcher interface {
	rowAdded(m model.Model) []nb.Key
}

// handlers registers a reconciler's informer handlers, which only enqueue keys; Run waits
// until each has seen its informer's initial list.
type handlers struct {
	factory informers.SharedInformerFactory
	queue   *reconcile.Loop[nb.Key]
	log     klog.Logger
	synced  []cache.InformerSynced
}

// handle adds h to inf.
func (w *handlers) handle(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	w.synced = append(w.synced, reg.HasSynced)
	return nil
}

// onNodeIPsChanged registers changed to run when a node's addresses (svcmodel.NodeIPs)
// change, a node with addresses appears or one goes.
func (w *handlers) onNodeIPsChanged(changed func()) error {
	check := func(old, cur *corev1.Node) {
		var o, c []*corev1.Node
		if old != nil {
			o = []*corev1.Node{old}
		}
		if cur != nil {
			c = []*corev1.Node{cur}
		}
		if !slices.Equal(svcmodel.NodeIPs(o), svcmodel.NodeIPs(c)) {
			changed()
		}
	}
	return w.handle(w.factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { check(nil, obj.(*corev1.Node)) },
		UpdateFunc: func(old, cur any) { check(old.(*corev1.Node), cur.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if n, ok := unwrapTombstone(obj).(*corev1.Node); ok {
				check(n, nil)
			}
		},
	})
}

// onNodeZoneChanged registers changed to run when a node's topology.kubernetes.io/zone label
// changes (a node that comes or goes has its switch's rows created or deleted, which
// enqueues the Services with per-node load balancers anyway).
func (w *handlers) onNodeZoneChanged(changed func()) error {
	return w.handle(w.factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if old.(*corev1.Node).Labels[corev1.LabelTopologyZone] != cur.(*corev1.Node).Labels[corev1.LabelTopologyZone] {
				changed()
			}
		},
	})
}

// add enqueues keys.
func (w *handlers) add(keys ...nb.Key) {
	for _, k := range keys {
		w.queue.Add(k)
	}
}

// addObject enqueues the key of kind naming obj (an object or its tombstone).
func (w *handlers) addObject(kind nb.Kind, obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		w.log.Error(err, "No key for object", "kind", kind)
		return
	}
	w.queue.Add(nb.Key{Kind: kind, Name: key})
}

// keysOf returns the keys of objs, the result of a lister's List: "namespace/name", or the
// name of a cluster-scoped object (the form cache.MetaNamespaceKeyFunc gives handlers).
func keysOf[T metav1.Object](objs []T, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = cache.MetaObjectToName(o).String()
	}
	return keys, nil
}

func unwrapTombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
