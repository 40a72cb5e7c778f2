package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/ipam"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// wantsNetwork reports whether a pod needs a port: bound to a node, on the pod network, and
// not finished (a Succeeded or Failed pod never runs again; its address is free).
func wantsNetwork(p *corev1.Pod) bool {
	return !p.Spec.HostNetwork && p.Spec.NodeName != "" &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podReconciler converges Pod keys: the pod's address (allocated, annotated) and its port
// on its node's switch. A pod waits for its node's switch; the node's sync enqueues it.
type podReconciler struct {
	*caches
	// nbc finds the rows that still name a departing pod's address.
	nbc client.Client
}

func newPodReconciler(s *caches, w *handlers, nbc client.Client) (*podReconciler, error) {
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
	return &podReconciler{caches: s, nbc: nbc}, nil
}

func (*podReconciler) kind() nb.Kind { return nb.Pod }

func (r *podReconciler) keys() ([]string, error) { return keysOf(r.pods.List(labels.Everything())) }

// desired returns a pod's port, after allocating its address (annotated on the pod first).
// A pod whose node has no switch yet, or whose annotation is unusable, is left as it is; a
// pod that is gone or finished has no port, and its address is freed once the port is gone.
func (r *podReconciler) desired(ctx context.Context, key string) (desire, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return desire{keep: true}, nil // not a key we made; nothing to retry
	}
	pod, err := r.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !wantsNetwork(pod)) {
		// No port, then free the address: not before, or a new pod could get the address
		// of a port that still exists. And not before every row that names the address
		// (NetworkPolicy peer address sets, named-port ACLs) has let go of it: a new pod
		// given the address meanwhile would pass the old pod's policies (audit M2).
		var needs []nb.Key
		if _, ip, held := r.ipam.PodIP(key); held {
			if needs, err = r.naming(ctx, ip); err != nil {
				return desire{}, err
			}
		}
		return desire{syncFirst: needs, afterCommit: func(*nb.Plan) ([]nb.Key, error) {
			if ip, ok := r.ipam.ReleasePod(key); ok {
				r.log.V(2).Info("Released pod address", "pod", key, "ip", ip)
			}
			return nil, nil
		}}, nil
	}
	if err != nil {
		return desire{}, err
	}
	if contract.ReservedPodNamespace(ns) {
		r.warn(pod, ReasonReservedNamespace, "namespace %q is reserved: its pods' logical ports would take the names of node gateway ports; the pod gets no network", ns)
		return desire{}, nil
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
		return desire{keep: true}, nil
	}
	ip, ok, err := r.podAddress(ctx, pod, subnet)
	if err != nil {
		return desire{}, err
	}
	if !ok {
		return desire{keep: true}, nil
	}
	rows, err := topology.PodRows(topology.Pod{Namespace: ns, Name: name, UID: string(pod.UID), Node: node, IP: ip})
	if err != nil {
		return desire{}, err
	}
	return desire{rows: rows}, nil
}

// naming returns the owners of the rows in the NB that name ip, pods' aside: the keys that
// must sync before ip may go to another pod.
func (r *podReconciler) naming(ctx context.Context, ip netip.Addr) ([]nb.Key, error) {
	addr := ip.String()
	var sets []*nbdb.AddressSet
	if err := r.nbc.WhereCache(func(s *nbdb.AddressSet) bool { return slices.Contains(s.Addresses, addr) }).List(ctx, &sets); err != nil {
		return nil, fmt.Errorf("address sets holding %s: %w", addr, err)
	}
	// An ACL match names addresses in sets such as "ip4.dst == {10.244.1.5, 10.244.1.6}".
	word := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(addr) + `($|[^0-9./])`)
	var acls []*nbdb.ACL
	if err := r.nbc.WhereCache(func(a *nbdb.ACL) bool { return strings.Contains(a.Match, addr) && word.MatchString(a.Match) }).List(ctx, &acls); err != nil {
		return nil, fmt.Errorf("ACLs naming %s: %w", addr, err)
	}
	var keys []nb.Key
	add := func(m model.Model) {
		if k, ours := nb.OwnerOf(m); ours && k.Known() && k.Kind != nb.Pod && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, s := range sets {
		add(s)
	}
	for _, a := range acls {
		add(a)
	}
	return keys, nil
}

// podAddress returns the pod's address: the one the master holds for it, or a new one. Only
// the master decides a pod's address; the pod-network annotation is the master's message to
// the node agent, which anyone who may patch the pod can also write, so it is never read
// as a request. It is (re)written before any port uses the address whenever it differs from
// what the master holds: a value the master did not write is overwritten, with an Event
// naming the pod. ok is false when the pod went away meanwhile.
func (r *podReconciler) podAddress(ctx context.Context, pod *corev1.Pod, subnet netip.Prefix) (netip.Addr, bool, error) {
	key := pod.Namespace + "/" + pod.Name
	node := pod.Spec.NodeName
	ip, fresh := netip.Addr{}, false
	if n, held, ok := r.ipam.PodIP(key); ok && n == node {
		ip = held
	} else {
		var err error
		ip, err = r.ipam.AllocatePodIP(node, key)
		if errors.Is(err, ipam.ErrExhausted) {
			r.warn(pod, ReasonPodAddressExhausted, "no free address on node %s: %v", node, err)
			return netip.Addr{}, false, err // pods come and go: retry
		}
		if err != nil {
			return netip.Addr{}, false, err
		}
		fresh = true
	}
	info := topology.PodNetwork(subnet, ip)
	value, err := info.Marshal()
	if err != nil {
		return netip.Addr{}, false, err
	}
	cur, has := pod.Annotations[contract.PodNetworkKey]
	if has && samePodNetwork(cur, info) {
		return ip, true, nil
	}
	if err := r.annotatePod(ctx, pod, contract.PodNetworkKey, value); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Gone, or replaced by a new pod of the same name: its own events follow.
			if fresh {
				r.ipam.ReleasePod(key)
			}
			return netip.Addr{}, false, nil
		}
		return netip.Addr{}, false, fmt.Errorf("annotate pod %s: %w", key, err)
	}
	switch _, perr := contract.ParsePodNetwork(cur); {
	case !has:
		r.log.V(2).Info("Allocated pod address", "pod", key, "ip", ip)
	case perr != nil:
		r.warn(pod, ReasonInvalidPodNetwork, "%v; replaced with the master's allocation %s", perr, ip)
	default:
		// Nothing but the master may choose a pod's addresses: a value it did not write
		// could take another pod's MAC or address, or widen other tenants' policies.
		r.warn(pod, ReasonPodNetworkOverwritten, "annotation %s was not written by the master (%s); replaced with the master's allocation %s",
			contract.PodNetworkKey, cur, ip)
	}
	return ip, true, nil
}

// samePodNetwork reports whether annotation value says what info says (JSON may differ in
// spelling, not in meaning).
func samePodNetwork(value string, info contract.PodNetworkInfo) bool {
	got, err := contract.ParsePodNetwork(value)
	if err != nil {
		return false
	}
	want, err := info.Parse()
	return err == nil && slices.Equal(got.IPs, want.IPs) && got.MAC.String() == want.MAC.String() &&
		slices.Equal(got.Gateways, want.Gateways) && slices.Equal(got.Routes, want.Routes)
}
