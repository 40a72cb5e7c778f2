package controller

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Reasons of the NetworkPolicy Events.
const (
	ReasonInvalidNetworkPolicy = "InvalidNetworkPolicy" // NetworkPolicy: not expressible, fails closed
	ReasonInvalidACLLogging    = "InvalidACLLogging"    // Namespace: acl-logging annotation unusable
)

// peerEntry is one shared peer address set and the policies using it.
type peerEntry struct {
	peer     netpol.Peer
	policies map[string]bool
}

// netpolIndex is what the handlers need to turn a pod or namespace change into the few keys
// it affects, without recomputing every policy: the peers (by namespace for the peers of
// one namespace, in one set for the peers with a namespace selector) and the policies whose
// egress rules name ports. Policy syncs maintain it; Run primes it from every policy before
// any sync, so that no peer sync deletes an address set a policy about to be synced uses.
type netpolIndex struct {
	mu           sync.Mutex
	peers        map[string]*peerEntry      // by peer key
	byPolicy     map[string][]string        // policy key -> its peer keys
	nsPeers      map[string]map[string]bool // namespace -> keys of the peers of that namespace only
	clusterPeers map[string]bool            // keys of the peers with a namespace selector
	namedEgress  map[string]bool            // keys of the policies with named egress ports
}

func newNetpolIndex() *netpolIndex {
	return &netpolIndex{peers: map[string]*peerEntry{}, byPolicy: map[string][]string{},
		nsPeers: map[string]map[string]bool{}, clusterPeers: map[string]bool{}, namedEgress: map[string]bool{}}
}

// set records the peers of policy (none for a deleted policy) and returns the keys of the
// peers no policy uses any more.
func (x *netpolIndex) set(policy string, peers []netpol.Peer, namedEgress bool) (released []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if namedEgress {
		x.namedEgress[policy] = true
	} else {
		delete(x.namedEgress, policy)
	}
	keys := make([]string, 0, len(peers))
	for _, p := range peers {
		k := p.Key()
		keys = append(keys, k)
		e := x.peers[k]
		if e == nil {
			e = &peerEntry{peer: p, policies: map[string]bool{}}
			x.peers[k] = e
			if p.NamespaceSelector == nil {
				if x.nsPeers[p.Namespace] == nil {
					x.nsPeers[p.Namespace] = map[string]bool{}
				}
				x.nsPeers[p.Namespace][k] = true
			} else {
				x.clusterPeers[k] = true
			}
		}
		e.policies[policy] = true
	}
	for _, k := range x.byPolicy[policy] {
		if slices.Contains(keys, k) {
			continue
		}
		e := x.peers[k]
		if e == nil {
			continue
		}
		delete(e.policies, policy)
		if len(e.policies) == 0 {
			delete(x.peers, k)
			delete(x.clusterPeers, k)
			if m := x.nsPeers[e.peer.Namespace]; m != nil {
				delete(m, k)
				if len(m) == 0 {
					delete(x.nsPeers, e.peer.Namespace)
				}
			}
			released = append(released, k)
		}
	}
	if len(keys) == 0 {
		delete(x.byPolicy, policy)
	} else {
		x.byPolicy[policy] = keys
	}
	return released
}

func (x *netpolIndex) peer(key string) (netpol.Peer, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.peers[key]
	if !ok {
		return netpol.Peer{}, false
	}
	return e.peer, true
}

// matching returns the keys of the peers that select pod (in ns), or, for pod nil, the
// peers with a namespace selector that select ns.
func (x *netpolIndex) matching(ns netpol.Namespace, pod *netpol.Pod) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	check := func(k string) {
		e := x.peers[k]
		if pod == nil && e.peer.SelectsNamespace(ns) || pod != nil && e.peer.Selects(ns, *pod) {
			out = append(out, k)
		}
	}
	if pod != nil {
		for k := range x.nsPeers[ns.Name] {
			check(k)
		}
	}
	for k := range x.clusterPeers {
		check(k)
	}
	return out
}

func (x *netpolIndex) allPeers() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Keys(x.peers))
}

func (x *netpolIndex) namedEgressPolicies() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Keys(x.namedEgress))
}

func policyKey(name string) nb.Key { return nb.Key{Kind: nb.NetworkPolicy, Name: name} }
func peerKey(name string) nb.Key   { return nb.Key{Kind: nb.NetworkPolicyPeer, Name: name} }

// setUpNetpolInformers creates the NetworkPolicy and Namespace informers and the pod
// handler that finds the policies and peers a pod change affects.
func (c *Controller) setUpNetpolInformers() error {
	polInf := c.factory.Networking().V1().NetworkPolicies()
	nsInf := c.factory.Core().V1().Namespaces()
	c.policies, c.namespaces = polInf.Lister(), nsInf.Lister()
	polReg, err := polInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueObject(nb.NetworkPolicy, obj) },
		UpdateFunc: func(old, cur any) {
			if old.(*networkingv1.NetworkPolicy).ResourceVersion != cur.(*networkingv1.NetworkPolicy).ResourceVersion {
				c.enqueueObject(nb.NetworkPolicy, cur)
			}
		},
		DeleteFunc: func(obj any) { c.enqueueObject(nb.NetworkPolicy, obj) },
	})
	if err != nil {
		return err
	}
	nsReg, err := nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.namespaceChanged(nil, obj.(*corev1.Namespace)) },
		UpdateFunc: func(old, cur any) {
			c.namespaceChanged(old.(*corev1.Namespace), cur.(*corev1.Namespace))
		},
		DeleteFunc: func(obj any) {
			if ns, ok := unwrapTombstone(obj).(*corev1.Namespace); ok {
				c.namespaceChanged(ns, nil)
			}
		},
	})
	if err != nil {
		return err
	}
	podReg, err := c.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podPolicyChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if !maps.Equal(o.Labels, n.Labels) || o.Status.Phase != n.Status.Phase ||
				!slices.Equal(o.Status.PodIPs, n.Status.PodIPs) || o.UID != n.UID ||
				o.Annotations[contract.PodNetworkKey] != n.Annotations[contract.PodNetworkKey] {
				c.podPolicyChanged(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := unwrapTombstone(obj).(*corev1.Pod); ok {
				c.podPolicyChanged(p)
			}
		},
	})
	if err != nil {
		return err
	}
	c.synced = append(c.synced, polReg.HasSynced, nsReg.HasSynced, podReg.HasSynced)
	return nil
}

func unwrapTombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// namespaceChanged enqueues what a namespace's labels and logging annotation feed: the peers
// with a namespace selector matching the old or new labels, the policies resolving named
// egress ports, and, for a logging change, the namespace's policies.
func (c *Controller) namespaceChanged(old, cur *corev1.Namespace) {
	var oldLabels, curLabels map[string]string
	var oldLog, curLog string
	name := ""
	if old != nil {
		oldLabels, oldLog, name = old.Labels, old.Annotations[netpol.LoggingAnnotation], old.Name
	}
	if cur != nil {
		curLabels, curLog, name = cur.Labels, cur.Annotations[netpol.LoggingAnnotation], cur.Name
		if _, err := netpol.ParseLogging(curLog); err != nil && (old == nil || oldLog != curLog) {
			c.warn(cur, ReasonInvalidACLLogging, "%v; ACL logging is off for the namespace", err)
		}
	}
	if old == nil || cur == nil || !maps.Equal(oldLabels, curLabels) {
		keys := map[string]bool{}
		for _, n := range []*corev1.Namespace{old, cur} {
			if n == nil {
				continue
			}
			for _, k := range c.np.matching(netpol.Namespace{Name: name, Labels: n.Labels}, nil) {
				keys[k] = true
			}
		}
		for k := range keys {
			c.queue.Add(peerKey(k))
		}
		for _, p := range c.np.namedEgressPolicies() {
			c.queue.Add(policyKey(p))
		}
	}
	if old != nil && cur != nil && oldLog != curLog {
		pols, err := c.policies.NetworkPolicies(name).List(labels.Everything())
		if err == nil {
			for _, p := range pols {
				c.queue.Add(policyKey(netpol.PolicyName(p)))
			}
		}
	}
}

// podPolicyChanged enqueues what the given versions of a pod feed: the policies of its
// namespace selecting it (port group, named ports), the peers selecting it, and the
// policies resolving named egress ports.
func (c *Controller) podPolicyChanged(versions ...*corev1.Pod) {
	peers := map[string]bool{}
	for _, p := range versions {
		ns := c.npNamespace(p.Namespace)
		pols, err := c.policies.NetworkPolicies(p.Namespace).List(labels.Everything())
		if err != nil {
			continue
		}
		for _, pol := range pols {
			sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
			if err != nil || sel.Matches(labels.Set(p.Labels)) {
				c.queue.Add(policyKey(netpol.PolicyName(pol)))
			}
		}
		np := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
		for _, k := range c.np.matching(ns, &np) {
			peers[k] = true
		}
	}
	for k := range peers {
		c.queue.Add(peerKey(k))
	}
	if len(versions) > 0 {
		for _, p := range c.np.namedEgressPolicies() {
			c.queue.Add(policyKey(p))
		}
	}
}

// primeNetpol records the peers of every policy before any sync runs.
func (c *Controller) primeNetpol() error {
	pols, err := c.policies.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, p := range pols {
		peers, err := netpol.PolicyPeers(p)
		if err != nil {
			continue // its sync reports it
		}
		c.np.set(netpol.PolicyName(p), peers, netpol.HasNamedEgressPorts(p))
	}
	return nil
}

// enqueueNetpol enqueues every policy and every peer in use.
func (c *Controller) enqueueNetpol() error {
	pols, err := c.policies.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, p := range pols {
		c.queue.Add(policyKey(netpol.PolicyName(p)))
	}
	for _, k := range c.np.allPeers() {
		c.queue.Add(peerKey(k))
	}
	return nil
}

func (c *Controller) npNamespace(name string) netpol.Namespace {
	ns := netpol.Namespace{Name: name}
	if n, err := c.namespaces.Get(name); err == nil {
		ns.Labels = n.Labels
	}
	return ns
}

// npPod is what the translation needs of p; ok is false for a pod that has no network or
// has finished.
func (c *Controller) npPod(ctx context.Context, p *corev1.Pod) (netpol.Pod, bool) {
	if !wantsNetwork(p) {
		return netpol.Pod{}, false
	}
	out := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels,
		Port: contract.PodPort(p.Namespace, p.Name)}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() {
			out.IP = a
			break
		}
	}
	if !out.IP.IsValid() {
		if pn, err := contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey]); err == nil && len(pn.IPs) > 0 {
			out.IP = pn.IPs[0].Addr()
		}
	}
	for _, ctr := range p.Spec.Containers {
		out.Ports = append(out.Ports, ctr.Ports...)
	}
	lsp := &nbdb.LogicalSwitchPort{Name: out.Port}
	if err := c.nb.Get(ctx, lsp); err == nil && lsp.ExternalIDs[nb.NameKey] == p.Namespace+"/"+p.Name {
		out.PortUUID = lsp.UUID
	}
	return out, true
}

// podsIn returns the pods of namespace ns.
func (c *Controller) podsIn(ctx context.Context, ns string) []netpol.Pod {
	pods, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]netpol.Pod, 0, len(pods))
	for _, p := range pods {
		if np, ok := c.npPod(ctx, p); ok {
			out = append(out, np)
		}
	}
	return out
}

// peerPods returns the pods peer selects.
func (c *Controller) peerPods(ctx context.Context, peer netpol.Peer) []netpol.Pod {
	var nss []string
	if peer.NamespaceSelector == nil {
		nss = []string{peer.Namespace}
	} else {
		all, err := c.namespaces.List(peer.NamespaceSelector)
		if err != nil {
			return nil
		}
		for _, n := range all {
			nss = append(nss, n.Name)
		}
	}
	var out []netpol.Pod
	for _, ns := range nss {
		pods, err := c.pods.Pods(ns).List(peer.PodSelector)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if np, ok := c.npPod(ctx, p); ok {
				out = append(out, np)
			}
		}
	}
	return out
}

func (c *Controller) allPods(ctx context.Context) []netpol.Pod {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []netpol.Pod
	for _, p := range pods {
		if np, ok := c.npPod(ctx, p); ok {
			out = append(out, np)
		}
	}
	return out
}

// policyRows translates one policy. A policy the translator cannot express exactly gets
// an Event and fails closed.
// pods are the pods of the policy's namespace when the caller has them already (nil: read them).
func (c *Controller) policyRows(ctx context.Context, pol *networkingv1.NetworkPolicy, pods []netpol.Pod) netpol.Output {
	logging, _ := netpol.ParseLogging(c.npNamespaceAnnotation(pol.Namespace))
	if pods == nil {
		pods = c.podsIn(ctx, pol.Namespace)
	}
	in := netpol.Input{
		Policy:     pol,
		Pods:       pods,
		Logging:    logging,
		Management: c.mgmtMatch,
		PeerPods:   func(p netpol.Peer) []netpol.Pod { return c.peerPods(ctx, p) },
		AllPods:    func() []netpol.Pod { return c.allPods(ctx) },
	}
	out, err := netpol.Translate(in)
	if err != nil {
		c.warn(pol, ReasonInvalidNetworkPolicy, "%v; the pods it selects get no allow rule from it", err)
	}
	return out
}

func (c *Controller) npNamespaceAnnotation(ns string) string {
	n, err := c.namespaces.Get(ns)
	if err != nil {
		return ""
	}
	return n.Annotations[netpol.LoggingAnnotation]
}

// syncPolicy converges one policy: the address sets of its peers first (its ACLs name
// them), then its port group and ACLs, then the peers it no longer uses.
func (c *Controller) syncPolicy(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pol, err := c.policies.NetworkPolicies(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if _, err := c.apply(ctx, policyKey(key), nil); err != nil {
			return err
		}
		for _, k := range c.np.set(key, nil, false) {
			c.queue.Add(peerKey(k))
		}
		return nil
	}
	if err != nil {
		return err
	}
	out := c.policyRows(ctx, pol, nil)
	released := c.np.set(key, out.Peers, netpol.HasNamedEgressPorts(pol))
	for _, p := range out.Peers {
		if !c.addressSetExists(ctx, p.AddressSetName()) {
			if err := c.syncPeer(ctx, p.Key()); err != nil {
				return err
			}
		}
	}
	if _, err := c.apply(ctx, policyKey(key), out.Rows); err != nil {
		return err
	}
	for _, k := range released {
		c.queue.Add(peerKey(k))
	}
	return nil
}

func (c *Controller) addressSetExists(ctx context.Context, name string) bool {
	return c.nb.Get(ctx, &nbdb.AddressSet{Name: name}) == nil
}

// syncPeer converges one peer's address set; a peer no policy uses has none.
func (c *Controller) syncPeer(ctx context.Context, key string) error {
	peer, ok := c.np.peer(key)
	if !ok {
		_, err := c.apply(ctx, peerKey(key), nil)
		return err
	}
	_, err := c.apply(ctx, peerKey(key), []nb.Row{netpol.PeerRow(peer, c.peerPods(ctx, peer))})
	return err
}

// npNBHandler enqueues the policies selecting a pod when its port appears in NB: the port
// group references the port by UUID.
type npNBHandler struct {
	c *Controller
}

func (h npNBHandler) OnAdd(table string, m model.Model) {
	lsp, ok := m.(*nbdb.LogicalSwitchPort)
	if !ok || lsp.ExternalIDs[nb.RoleKey] != string(nb.PodPort) {
		return
	}
	ns, name, err := cache.SplitMetaNamespaceKey(lsp.ExternalIDs[nb.NameKey])
	if err != nil {
		return
	}
	if p, err := h.c.pods.Pods(ns).Get(name); err == nil {
		h.c.podPolicyChanged(p)
	}
}

func (h npNBHandler) OnUpdate(string, model.Model, model.Model) {}
func (h npNBHandler) OnDelete(string, model.Model)              {}

// startupBatch is how many keys' changes share one transaction at start-up.
const startupBatch = 200

// syncNetpolBatched converges every peer and policy before the workers start, in start-up
// batches (batch.go) of startupBatch keys. Peers go first, since ACLs name their address
// sets.
func (c *Controller) syncNetpolBatched(ctx context.Context) {
	start := time.Now()
	var batch []batchItem
	txns, total := 0, 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		n, err := c.applyBatch(ctx, batch)
		if err != nil {
			c.log.Error(err, "Start-up batch failed; the work queue retries its keys", "keys", len(batch))
		}
		if n > 0 {
			txns++
		}
		total += n
		batch = nil
	}
	add := func(key nb.Key, rows []nb.Row) {
		batch = append(batch, batchItem{key: key, rows: rows})
		if len(batch) >= startupBatch {
			flush()
		}
	}
	for _, k := range c.np.allPeers() {
		if peer, ok := c.np.peer(k); ok {
			add(peerKey(k), []nb.Row{netpol.PeerRow(peer, c.peerPods(ctx, peer))})
		}
	}
	flush()
	pols, err := c.policies.List(labels.Everything())
	if err != nil {
		return
	}
	// The policies of one namespace share its pods: convert them once.
	slices.SortFunc(pols, func(a, b *networkingv1.NetworkPolicy) int { return strings.Compare(a.Namespace, b.Namespace) })
	var ns string
	var pods []netpol.Pod
	for _, pol := range pols {
		if pol.Namespace != ns || pods == nil {
			ns, pods = pol.Namespace, c.podsIn(ctx, pol.Namespace)
			if pods == nil {
				pods = []netpol.Pod{}
			}
		}
		out := c.policyRows(ctx, pol, pods)
		add(policyKey(netpol.PolicyName(pol)), out.Rows)
	}
	flush()
	c.log.Info("NetworkPolicy start-up sync", "policies", len(pols), "changedKeys", total, "transactions", txns,
		"took", time.Since(start).Round(time.Millisecond))
}
