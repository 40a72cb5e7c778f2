package controller

import (
	"context"
	"fmt"
	"maps"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// setUpInformers creates the Node and Pod informers. Their handlers only enqueue keys.
func (c *Controller) setUpInformers() error {
	nodeInf := c.factory.Core().V1().Nodes()
	podInf := c.factory.Core().V1().Pods()
	if err := podInf.Informer().AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("controller: pod index: %w", err)
	}
	c.nodes, c.pods, c.podsIdx = nodeInf.Lister(), podInf.Lister(), podInf.Informer().GetIndexer()

	nodeReg, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueObject(nb.Node, obj) },
		UpdateFunc: func(old, cur any) {
			// Node status changes every few seconds; only annotations feed the topology.
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if !maps.Equal(o.Annotations, n.Annotations) {
				c.enqueueObject(nb.Node, cur)
			}
		},
		DeleteFunc: func(obj any) { c.enqueueObject(nb.Node, obj) },
	})
	if err != nil {
		return err
	}
	podReg, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueObject(nb.Pod, obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if o.UID != n.UID || o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase ||
				o.Annotations[contract.PodNetworkKey] != n.Annotations[contract.PodNetworkKey] {
				c.enqueueObject(nb.Pod, cur)
			}
		},
		DeleteFunc: func(obj any) { c.enqueueObject(nb.Pod, obj) },
	})
	if err != nil {
		return err
	}
	svcSynced, err := c.setUpServiceInformers()
	if err != nil {
		return err
	}
	c.synced = append([]cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced}, svcSynced...)
	return c.setUpNetpolInformers()
}

func (c *Controller) enqueueObject(kind nb.Kind, obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error(err, "No key for object", "kind", kind)
		return
	}
	c.queue.Add(nb.Key{Kind: kind, Name: key})
}

// enqueueAll enqueues the cluster, every Node and Pod, and every owner of a row in the NB
// (an owner that no longer exists has its rows deleted by its sync).
func (c *Controller) enqueueAll(ctx context.Context) error {
	c.queue.Add(nb.Key{Kind: nb.Cluster, Name: nb.ClusterName})
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		c.queue.Add(nb.Key{Kind: nb.Node, Name: n.Name})
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, p := range pods {
		c.queue.Add(nb.Key{Kind: nb.Pod, Name: p.Namespace + "/" + p.Name})
	}
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, s := range svcs {
		c.queue.Add(nb.Key{Kind: nb.Service, Name: s.Namespace + "/" + s.Name})
	}
	rows, err := c.view.All(ctx)
	if err != nil {
		return err
	}
	for _, m := range rows {
		c.enqueueOwner(m)
	}
	return c.enqueueNetpol()
}

// enqueueOwner enqueues the owner of NB row m, if it is one of ours of a kind we sync. Rows
// of other kinds may belong to controllers this build does not have; they are left alone.
func (c *Controller) enqueueOwner(m model.Model) {
	if key, ours := nb.OwnerOf(m); ours && key.Known() {
		c.queue.Add(key)
	}
}

// enqueuePodsOn enqueues the pods bound to node.
func (c *Controller) enqueuePodsOn(node string) {
	objs, err := c.podsIdx.ByIndex(podsByNode, node)
	if err != nil {
		c.log.Error(err, "Listing pods by node", "node", node)
		return
	}
	for _, o := range objs {
		c.enqueueObject(nb.Pod, o)
	}
}

// nbHandler turns NB cache events into keys. A change to one of our rows by someone else
// (ovn-nbctl, another writer) resyncs its owner, which puts it back.
//
// After a reconnection libovsdb may empty and refill the cache without reporting the rows
// that went away meanwhile (see internal/ovsdb). A refill reports every row again, including
// the one NB_Global row; a second NB_Global insertion therefore means "resync everything".
type nbHandler struct {
	ctx context.Context // Run's
	c   *Controller
}

func (h *nbHandler) OnAdd(table string, m model.Model) {
	if table == nbdb.NBGlobalTable {
		n := h.c.refills.Add(1)
		h.c.log.Info("NB cache refilled (reconnected); resyncing every key", "refills", n)
		if err := h.c.enqueueAll(h.ctx); err != nil {
			h.c.log.Error(err, "Resync after reconnection")
		}
		return
	}
	h.c.enqueueOwner(m)
}

func (h *nbHandler) OnUpdate(table string, old, cur model.Model) {
	if table == nbdb.NBGlobalTable || nb.ManagedEqual(old, cur) {
		return // only reference columns changed, e.g. another owner's port on our switch
	}
	h.c.enqueueOwner(old)
	h.c.enqueueOwner(cur)
}

func (h *nbHandler) OnDelete(table string, m model.Model) {
	h.c.enqueueOwner(m)
}
