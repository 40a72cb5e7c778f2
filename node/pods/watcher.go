// Package pods is what the node agent knows about the pods bound to its node: an informer
// over them, and a wait for the network annotation the master writes on each.
package pods

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/containernetworking/cni/pkg/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
)

// ErrNotFound says the API server has no such pod (with that UID).
var ErrNotFound = errors.New("pod not found")

// Watcher caches the pods bound to one node.
type Watcher struct {
	client   kubernetes.Interface
	node     string
	informer cache.SharedIndexInformer
	lister   listers.PodLister

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every pod event
}

// NewWatcher returns a watcher of the pods whose spec.nodeName is node; Start it.
func NewWatcher(client kubernetes.Interface, node string) *Watcher {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}),
		informers.WithTransform(reconcile.StripManagedFields))
	inf := factory.Core().V1().Pods()
	w := &Watcher{client: client, node: node, informer: inf.Informer(), lister: inf.Lister(), changed: make(chan struct{})}
	// Every event wakes every waiter, which then looks at its own pod in the cache: ADDs
	// in flight on one node are few, and this cannot lose a wake-up.
	w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.signal() },
		UpdateFunc: func(any, any) { w.signal() },
		DeleteFunc: func(any) { w.signal() },
	})
	return w
}

// Start runs the informer until ctx is done.
func (w *Watcher) Start(ctx context.Context) { go w.informer.Run(ctx.Done()) }

// Synced reports whether the informer has listed the node's pods once.
func (w *Watcher) Synced() bool { return w.informer.HasSynced() }

func (w *Watcher) signal() {
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *Watcher) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Network returns the pod's parsed network annotation and its UID, waiting until ctx is
// done for the master to write it. It fails at once when the API server does not know the
// pod (ErrNotFound), knows it on another node or with another UID than p.UID (the pod was
// recreated), or the annotation does not parse. Waiting times out with a CNI "try again
// later" error.
func (w *Watcher) Network(ctx context.Context, p cni.PodArgs) (contract.PodNetwork, string, error) {
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return contract.PodNetwork{}, "", types.NewError(types.ErrTryAgainLater, "the node agent has not listed its pods yet", "")
	}
	askedAPI := false
	for {
		ch := w.changes()
		pod, err := w.lister.Pods(p.Namespace).Get(p.Name)
		if err == nil && (p.UID == "" || string(pod.UID) == p.UID) {
			if v, ok := pod.Annotations[contract.PodNetworkKey]; ok {
				pn, err := contract.ParsePodNetwork(v)
				return pn, string(pod.UID), err
			}
		} else if !askedAPI {
			// Not in the cache (or an older pod of the same name): either the pod is not
			// ours, or the informer has not seen it yet. Ask once.
			askedAPI = true
			if err := w.checkAPI(ctx, p); err != nil {
				return contract.PodNetwork{}, "", err
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return contract.PodNetwork{}, "", types.NewError(types.ErrTryAgainLater,
				fmt.Sprintf("timed out waiting for the master to write %s on the pod", contract.PodNetworkKey), ctx.Err().Error())
		}
	}
}

// checkAPI reads the pod from the API server and fails if it cannot be this node's pod p.
func (w *Watcher) checkAPI(ctx context.Context, p cni.PodArgs) error {
	pod, err := w.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ErrNotFound
	case err != nil:
		return nil // the API server may be away for a moment; keep waiting on the cache
	case p.UID != "" && string(pod.UID) != p.UID:
		return fmt.Errorf("%w with UID %s (the pod of that name has UID %s)", ErrNotFound, p.UID, pod.UID)
	case pod.Spec.NodeName != w.node:
		return fmt.Errorf("the pod is bound to node %q, not to this node %q", pod.Spec.NodeName, w.node)
	}
	return nil
}

// Exists says whether pod namespace/name with UID uid is still this node's: from the cache
// when it holds the pod, else from the API server, so a pod the informer has not seen yet
// is never taken for gone. An error means the answer is unknown.
func (w *Watcher) Exists(ctx context.Context, namespace, name, uid string) (bool, error) {
	if pod, err := w.lister.Pods(namespace).Get(name); err == nil && string(pod.UID) == uid && pod.Spec.NodeName == w.node {
		return true, nil
	}
	pod, err := w.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return string(pod.UID) == uid && pod.Spec.NodeName == w.node, nil
}
