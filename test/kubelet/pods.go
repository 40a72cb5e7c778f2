//go:build linux

package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			k.logf("pod %s: %v (retrying)", key, err)
		}
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync converges what runs for the pod key on this node with the pod in the informer cache:
// handlers only enqueue keys, and every decision is made here from the current state.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made; nothing to retry
	}
	pod, err := k.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return err
	}
	sb := k.sandbox(key)
	if sb != nil && (pod == nil || pod.UID != sb.uid) {
		// Gone from the API without a graceful deletion (force-deleted, or its Node deleted
		// and the pod garbage-collected), or replaced by a new pod of the same name: clean
		// up as for a deletion.
		if err := k.killPod(ctx, sb, nil); err != nil {
			return err
		}
		sb = nil
	}
	if pod == nil {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		if sb != nil {
			if err := k.killPod(ctx, sb, pod); err != nil {
				return err
			}
		}
		return k.finishDeletion(ctx, pod)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if sb == nil {
		if netErr := k.networkError(); netErr != nil && !pod.Spec.HostNetwork {
			// kubelet starts no pod network while the runtime reports the network not ready.
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "NetworkNotReady",
				"network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: %v", netErr)
			return fmt.Errorf("network is not ready: %w", netErr)
		}
		if sb, err = k.createSandbox(ctx, pod); err != nil {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			return err
		}
		k.mu.Lock()
		k.sandboxes[key] = sb
		k.mu.Unlock()
		k.logf("pod %s: sandbox %s in %s, IPs %v, in %s", key, sb.containerID[:12], sb.netns, sb.ips,
			time.Since(sb.created).Round(time.Millisecond))
	}
	if sb.workload == nil || isDone(sb.workload.Done()) {
		if err := k.startWorkload(ctx, pod, sb); err != nil {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
			return err
		}
	}
	return k.reportRunning(ctx, pod, sb)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (k *Kubelet) sandbox(key string) *sandbox {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sandboxes[key]
}

// killPod tears the pod's sandbox down; pod, when still in the API, gets kubelet's
// FailedKillPod event if that fails.
func (k *Kubelet) killPod(ctx context.Context, sb *sandbox, pod *corev1.Pod) error {
	if err := k.teardown(ctx, sb); err != nil {
		if pod != nil {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedKillPod", "error killing pod: %v", err)
		}
		return err
	}
	k.mu.Lock()
	delete(k.sandboxes, sb.key)
	k.mu.Unlock()
	k.logf("pod %s: sandbox %s removed", sb.key, sb.containerID[:12])
	return nil
}

// finishDeletion deletes the pod for good once nothing of it runs: the API server only marks
// a pod for deletion and waits for its kubelet to say its containers are gone. The UID
// precondition keeps a new pod of the same name safe.
func (k *Kubelet) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// reportRunning patches the pod's status when it differs from runningStatus. The patch
// carries the pod's UID, which the API server refuses to change: a status meant for a pod
// that was replaced by a new one of the same name fails instead of landing on the new pod.
func (k *Kubelet) reportRunning(ctx context.Context, pod *corev1.Pod, sb *sandbox) error {
	st := runningStatus(pod, k.cfg.NodeIP, sb, metav1.Now())
	if equality.Semantic.DeepEqual(pod.Status, st) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   st,
	})
	if err != nil {
		return err
	}
	if _, err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, apitypes.MergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		// From the sandbox's start: creationTimestamp has whole seconds only.
		k.logf("pod %s: Running and Ready, %s after its sandbox was started", sb.key,
			time.Since(sb.created).Round(time.Millisecond))
	}
	return nil
}

// enqueueAll syncs every pod of the node again.
func (k *Kubelet) enqueueAll() {
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		k.queue.Add(p.Namespace + "/" + p.Name)
	}
}

// validAttachments are the CNI attachments of the sandboxes the kubelet runs, for GC.
func (k *Kubelet) validAttachments() []types.GCAttachment {
	k.mu.Lock()
	defer k.mu.Unlock()
	var valid []types.GCAttachment
	for _, sb := range k.sandboxes {
		if sb.rt != nil {
			valid = append(valid, types.GCAttachment{ContainerID: sb.rt.ContainerID, IfName: sb.rt.IfName})
		}
	}
	return valid
}
