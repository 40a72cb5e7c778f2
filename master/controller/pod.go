package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// syncPod converges one pod: its address (allocated, annotated) and its port.
func (c *Controller) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made; nothing to retry
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !wantsNetwork(pod)) {
		return c.removePod(ctx, key)
	}
	if err != nil {
		return err
	}
	node := pod.Spec.NodeName
	subnet, ok := c.ipam.NodeSubnet(node)
	if !ok {
		// The node's sync enqueues its pods once its switch exists.
		if _, err := c.nodes.Get(node); apierrors.IsNotFound(err) {
			c.warn(pod, ReasonUnknownNode, "bound to node %q, which does not exist", node)
		} else {
			c.warn(pod, ReasonNodeWithoutSubnet, "node %q has no pod subnet yet", node)
		}
		return nil
	}
	ip, mac, ok, err := c.podAddress(ctx, pod, subnet)
	if !ok || err != nil {
		return err
	}
	rows, err := topology.PodRows(topology.Pod{Namespace: ns, Name: name, UID: string(pod.UID), Node: node, IP: ip, MAC: mac})
	if err != nil {
		return err
	}
	_, err = c.apply(ctx, nb.Key{Kind: nb.Pod, Name: key}, rows)
	return err
}

// removePod deletes the pod's port, then frees its address.
func (c *Controller) removePod(ctx context.Context, key string) error {
	if _, err := c.apply(ctx, nb.Key{Kind: nb.Pod, Name: key}, nil); err != nil {
		return err
	}
	if ip, ok := c.ipam.ReleasePod(key); ok {
		c.log.V(2).Info("Released pod address", "pod", key, "ip", ip)
	}
	return nil
}

// podAddress returns the pod's address and MAC: the ones its annotation says, or new ones,
// annotated before any port exists (the annotation is what a restarted master rebuilds from).
// ok is false when the annotation is unusable: an Event says why, and the pod's port is left
// as it is, since the pod may run with those addresses.
func (c *Controller) podAddress(ctx context.Context, pod *corev1.Pod, subnet netip.Prefix) (netip.Addr, string, bool, error) {
	key := pod.Namespace + "/" + pod.Name
	if s, has := pod.Annotations[contract.PodNetworkKey]; has {
		ip, mac, err := c.annotatedAddress(pod, s, subnet)
		if err != nil {
			return netip.Addr{}, "", false, nil
		}
		return ip, mac, true, nil
	}
	ip, err := c.ipam.AllocatePodIP(pod.Spec.NodeName, key)
	if errors.Is(err, ipam.ErrExhausted) {
		c.warn(pod, ReasonPodAddressExhausted, "no free address on node %s: %v", pod.Spec.NodeName, err)
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
	if err := c.annotatePod(ctx, pod, contract.PodNetworkKey, value); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Gone, or replaced by a new pod of the same name: its own events follow.
			c.ipam.ReleasePod(key)
			return netip.Addr{}, "", false, nil
		}
		return netip.Addr{}, "", false, fmt.Errorf("annotate pod %s: %w", key, err)
	}
	c.log.V(2).Info("Allocated pod address", "pod", key, "ip", ip)
	return ip, info.MACAddress, true, nil
}

// annotatedAddress checks a pod-network annotation against the node's subnet and the other
// pods' addresses, and holds its address for the pod.
func (c *Controller) annotatedAddress(pod *corev1.Pod, value string, subnet netip.Prefix) (netip.Addr, string, error) {
	key := pod.Namespace + "/" + pod.Name
	pn, err := contract.ParsePodNetwork(value)
	if err != nil {
		c.warn(pod, ReasonInvalidPodNetwork, "%v; the pod's network is left as it is", err)
		return netip.Addr{}, "", err
	}
	ip := pn.IPs[0]
	if len(pn.IPs) != 1 || ip.Masked() != subnet {
		err := fmt.Errorf("addresses %v are not one address of node %s's subnet %s", pn.IPs, pod.Spec.NodeName, subnet)
		c.warn(pod, ReasonInvalidPodNetwork, "%v; the pod's network is left as it is", err)
		return netip.Addr{}, "", err
	}
	if err := c.ipam.ReservePodIP(pod.Spec.NodeName, key, ip.Addr()); err != nil {
		if errors.Is(err, ipam.ErrConflict) {
			c.warn(pod, ReasonPodIPConflict, "annotated address %s: %v", ip.Addr(), err)
		} else {
			c.warn(pod, ReasonInvalidPodNetwork, "annotated address %s: %v", ip.Addr(), err)
		}
		return netip.Addr{}, "", err
	}
	return ip.Addr(), pn.MAC.String(), nil
}
