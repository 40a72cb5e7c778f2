package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
)

// wantsNetwork reports whether a pod needs a port: bound to a node, on the pod network, and
// not finished (a Succeeded or Failed pod never runs again; its address is free).
func wantsNetwork(p *corev1.Pod) bool {
	return !p.Spec.HostNetwork && p.Spec.NodeName != "" &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podReconciler converges Pod keys: the pod's address (allocated, annotated) and its port
// on its node's switch. A pod waits for its node's switch; the node's sync enqueues it.
type podReconciler struct{ *shared }

func newPodReconciler(s *shared, w *watcher) (*podReconciler, error) {
	err := w.handle(w.factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.addObject(nb.Pod, obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if o.UID != n.UID || o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase ||
				o.Annotations[contract.PodNetworkKey] != n.Annotations[contract.PodNetworkKey] {
				w.addObject(nb.Pod, cur)
			}
		},
		DeleteFunc: func(obj any) { w.addObject(nb.Pod, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("controller: pod handler: %w", err)
	}
	return &podReconciler{s}, nil
}

func (*podReconciler) kind() nb.Kind { return nb.Pod }

func (r *podReconciler) keys() ([]string, error) { return keysOf(r.pods.List(labels.Everything())) }

// desired returns a pod's port, after allocating its address (annotated on the pod first).
// A pod whose node has no switch yet, or whose annotation is unusable, is left as it is; a
// pod that is gone or finished has no port, and its address is freed once the port is gone.
func (r *podReconciler) desired(ctx context.Context, key string) (desire, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return desire{leave: true}, nil // not a key we made; nothing to retry
	}
	pod, err := r.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !wantsNetwork(pod)) {
		// No port, then free the address: not before, or a new pod could get the address
		// of a port that still exists.
		return desire{then: func(*nb.Plan) ([]nb.Key, error) {
			if ip, ok := r.ipam.ReleasePod(key); ok {
				r.log.V(2).Info("Released pod address", "pod", key, "ip", ip)
			}
			return nil, nil
		}}, nil
	}
	if err != nil {
		return desire{}, err
	}
	node := pod.Spec.NodeName
	subnet, ok := r.ipam.NodeSubnet(node)
	if !ok {
		// The node's sync enqueues its pods once its switch exists.
		if _, err := r.nodes.Get(node); apierrors.IsNotFound(err) {
			r.warn(pod, ReasonUnknownNode, "bound to node %q, which does not exist", node)
		} else {
			r.warn(pod, ReasonNodeWithoutSubnet, "node %q has no pod subnet yet", node)
		}
		return desire{leave: true}, nil
	}
	ip, mac, ok, err := r.podAddress(ctx, pod, subnet)
	if err != nil {
		return desire{}, err
	}
	if !ok {
		return desire{leave: true}, nil
	}
	rows, err := topology.PodRows(topology.Pod{Namespace: ns, Name: name, UID: string(pod.UID), Node: node, IP: ip, MAC: mac})
	if err != nil {
		return desire{}, err
	}
	return desire{rows: rows}, nil
}

// podAddress returns the pod's address and MAC: the ones its annotation says, or new ones,
// annotated before any port exists (the annotation is what a restarted master rebuilds from).
// ok is false when the annotation is unusable: an Event says why, and the pod's port is left
// as it is, since the pod may run with those addresses.
func (r *podReconciler) podAddress(ctx context.Context, pod *corev1.Pod, subnet netip.Prefix) (netip.Addr, string, bool, error) {
	key := pod.Namespace + "/" + pod.Name
	if s, has := pod.Annotations[contract.PodNetworkKey]; has {
		ip, mac, err := r.annotatedAddress(pod, s, subnet)
		if err != nil {
			return netip.Addr{}, "", false, nil
		}
		return ip, mac, true, nil
	}
	ip, err := r.ipam.AllocatePodIP(pod.Spec.NodeName, key)
	if errors.Is(err, ipam.ErrExhausted) {
		r.warn(pod, ReasonPodAddressExhausted, "no free address on node %s: %v", pod.Spec.NodeName, err)
		return netip.Addr{}, "", false, err // pods come and go: retry
	}
	if err != nil {
		return netip.Addr{}, "", false, err
	}
	info := topology.PodNetwork(subnet, ip)
	value, err := info.Marshal()
	if err != nil {
		return netip.Addr{}, "", false, err
	}
	if err := r.annotatePod(ctx, pod, contract.PodNetworkKey, value); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Gone, or replaced by a new pod of the same name: its own events follow.
			r.ipam.ReleasePod(key)
			return netip.Addr{}, "", false, nil
		}
		return netip.Addr{}, "", false, fmt.Errorf("annotate pod %s: %w", key, err)
	}
	r.log.V(2).Info("Allocated pod address", "pod", key, "ip", ip)
	return ip, info.MACAddress, true, nil
}

// annotatedAddress checks a pod-network annotation against the node's subnet and the other
// pods' addresses, and holds its address for the pod.
func (r *podReconciler) annotatedAddress(pod *corev1.Pod, value string, subnet netip.Prefix) (netip.Addr, string, error) {
	key := pod.Namespace + "/" + pod.Name
	pn, err := contract.ParsePodNetwork(value)
	if err != nil {
		r.warn(pod, ReasonInvalidPodNetwork, "%v; the pod's network is left as it is", err)
		return netip.Addr{}, "", err
	}
	ip := pn.IPs[0]
	if len(pn.IPs) != 1 || ip.Masked() != subnet {
		err := fmt.Errorf("addresses %v are not one address of node %s's subnet %s", pn.IPs, pod.Spec.NodeName, subnet)
		r.warn(pod, ReasonInvalidPodNetwork, "%v; the pod's network is left as it is", err)
		return netip.Addr{}, "", err
	}
	if err := r.ipam.ReservePodIP(pod.Spec.NodeName, key, ip.Addr()); err != nil {
		if errors.Is(err, ipam.ErrConflict) {
			r.warn(pod, ReasonPodIPConflict, "annotated address %s: %v", ip.Addr(), err)
		} else {
			r.warn(pod, ReasonInvalidPodNetwork, "annotated address %s: %v", ip.Addr(), err)
		}
		return netip.Addr{}, "", err
	}
	return ip.Addr(), pn.MAC.String(), nil
}
