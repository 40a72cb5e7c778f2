package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Reasons of the NetworkPolicy Events.
const (
	ReasonInvalidNetworkPolicy = "InvalidNetworkPolicy" // NetworkPolicy: not expressible, fails closed
	ReasonInvalidACLLogging    = "InvalidACLLogging"    // Namespace: acl-logging annotation unusable
)

// netpolState is what the two NetworkPolicy kinds share: a policy key owns its port group
// and ACLs, a peer key the address set every identical peer of any policy uses. The index
// (netpol.Index) tells which policies use which peers; policy syncs keep it up to date.
type netpolState struct {
	*caches
	policies   networkinglisters.NetworkPolicyLister
	namespaces corelisters.NamespaceLister
	index      *netpol.Index
	mgmtMatch  string
	// translatePolicy, if set, replaces translateBounded (tests slow it down).
	translatePolicy func(ctx context.Context, in netpol.Input) (netpol.Output, error)

	// committed holds, by policy key, the peers of the policy's rows in the NB: the index
	// records them until a transaction commits rows that no longer name them.
	mu        sync.Mutex
	committed map[string]committedPeers
	// rows reads single rows of the NB cache: a pod's port, a peer's address set.
	rows interface {
		Get(context.Context, model.Model) error
	}
}

// policyReconciler converges NetworkPolicy keys.
type policyReconciler struct{ *netpolState }

// peerReconciler converges NetworkPolicyPeer keys; a peer no policy uses has no rows.
type peerReconciler struct{ *netpolState }

func policyKey(name string) nb.Key { return nb.Key{Kind: nb.NetworkPolicy, Name: name} }
func peerKey(name string) nb.Key   { return nb.Key{Kind: nb.NetworkPolicyPeer, Name: name} }

func peerKeys(names []string) []nb.Key {
	keys := make([]nb.Key, len(names))
	for i, n := range names {
		keys[i] = peerKey(n)
	}
	return keys
}

// newNetpolReconcilers returns the two NetworkPolicy reconcilers and registers the handlers
// that turn NetworkPolicy, Namespace and Pod changes into the few keys they affect. The
// pod reconciler watches pods too, with its own filter: a pod's port depends on its node
// and phase, a policy on its labels and addresses.
func newNetpolReconcilers(s *caches, nbc client.Client, w *handlers) (*policyReconciler, *peerReconciler, error) {
	polInf := w.factory.Networking().V1().NetworkPolicies()
	nsInf := w.factory.Core().V1().Namespaces()
	st := &netpolState{
		caches:     s,
		policies:   polInf.Lister(),
		namespaces: nsInf.Lister(),
		index:      netpol.NewIndex(),
		mgmtMatch:  netpol.ManagementMatch(s.cfg.ClusterCIDR, s.cfg.NodeSubnetBits),
		rows:       nbc,
	}
	err := w.handle(polInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.addObject(nb.NetworkPolicy, obj) },
		UpdateFunc: func(old, cur any) {
			if old.(*networkingv1.NetworkPolicy).ResourceVersion != cur.(*networkingv1.NetworkPolicy).ResourceVersion {
				w.addObject(nb.NetworkPolicy, cur)
			}
		},
		DeleteFunc: func(obj any) { w.addObject(nb.NetworkPolicy, obj) },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: networkpolicy handler: %w", err)
	}
	err = w.handle(nsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.add(st.namespaceChanged(nil, obj.(*corev1.Namespace))...) },
		UpdateFunc: func(old, cur any) {
			w.add(st.namespaceChanged(old.(*corev1.Namespace), cur.(*corev1.Namespace))...)
		},
		DeleteFunc: func(obj any) {
			if ns, ok := unwrapTombstone(obj).(*corev1.Namespace); ok {
				w.add(st.namespaceChanged(ns, nil)...)
			}
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: namespace handler: %w", err)
	}
	err = w.handle(w.factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.add(st.podChanged(obj.(*corev1.Pod))...) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if !maps.Equal(o.Labels, n.Labels) || o.Status.Phase != n.Status.Phase ||
				!slices.Equal(o.Status.PodIPs, n.Status.PodIPs) || o.UID != n.UID ||
				o.Annotations[contract.PodNetworkKey] != n.Annotations[contract.PodNetworkKey] {
				w.add(st.podChanged(o, n)...)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := unwrapTombstone(obj).(*corev1.Pod); ok {
				w.add(st.podChanged(p)...)
			}
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: pod handler for policies: %w", err)
	}
	// A node's addresses are left out of every ingress ipBlock: a change resyncs the
	// policies that have one.
	err = w.onNodeIPsChanged(func() { w.add(st.ipBlockPolicies()...) })
	if err != nil {
		return nil, nil, fmt.Errorf("controller: node handler for policies: %w", err)
	}
	return &policyReconciler{st}, &peerReconciler{st}, nil
}

// ipBlockPolicies returns the keys of the policies with an ingress ipBlock.
func (st *netpolState) ipBlockPolicies() []nb.Key {
	pols, err := st.policies.List(labels.Everything())
	if err != nil {
		st.log.Error(err, "Listing the policies whose ipBlocks a node's addresses change; the periodic resync syncs them")
	}
	var keys []nb.Key
	for _, p := range pols {
		if hasIngressIPBlock(p) {
			keys = append(keys, policyKey(netpol.PolicyName(p)))
		}
	}
	return keys
}

func hasIngressIPBlock(p *networkingv1.NetworkPolicy) bool {
	for _, r := range p.Spec.Ingress {
		for _, pe := range r.From {
			if pe.IPBlock != nil {
				return true
			}
		}
	}
	return false
}

// namespaceChanged returns the keys a namespace's labels and logging annotation feed: the
// peers with a namespace selector matching the old or new labels, the policies resolving
// named egress ports, and, for a logging change, the namespace's policies.
func (st *netpolState) namespaceChanged(old, cur *corev1.Namespace) []nb.Key {
	var oldLabels, curLabels map[string]string
	var oldLog, curLog string
	name := ""
	if old != nil {
		oldLabels, oldLog, name = old.Labels, old.Annotations[netpol.LoggingAnnotation], old.Name
	}
	if cur != nil {
		curLabels, curLog, name = cur.Labels, cur.Annotations[netpol.LoggingAnnotation], cur.Name
		if _, err := netpol.ParseLogging(curLog); err != nil && (old == nil || oldLog != curLog) {
			st.warn(cur, ReasonInvalidACLLogging, "%v; ACL logging is off for the namespace", err)
		}
	}
	var keys []nb.Key
	if old == nil || cur == nil || !maps.Equal(oldLabels, curLabels) {
		peers := map[string]bool{}
		for _, n := range []*corev1.Namespace{old, cur} {
			if n == nil {
				continue
			}
			for _, k := range st.index.Matching(netpol.Namespace{Name: name, Labels: n.Labels}, nil) {
				peers[k] = true
			}
		}
		keys = append(keys, peerKeys(slices.Collect(maps.Keys(peers)))...)
		for _, p := range st.index.NamedEgressPolicies() {
			keys = append(keys, policyKey(p))
		}
	}
	if old != nil && cur != nil && oldLog != curLog {
		pols, err := st.policies.NetworkPolicies(name).List(labels.Everything())
		if err != nil {
			st.log.Error(err, "Listing the policies of a namespace whose ACL logging changed; the periodic resync syncs them", "namespace", name)
		}
		for _, p := range pols {
			keys = append(keys, policyKey(netpol.PolicyName(p)))
		}
	}
	return keys
}

// podChanged returns the keys the given versions of a pod feed: the policies of its
// namespace selecting it (port group, named ports), the peers selecting it, and the
// policies resolving named egress ports.
func (st *netpolState) podChanged(versions ...*corev1.Pod) []nb.Key {
	var keys []nb.Key
	peers := map[string]bool{}
	for _, p := range versions {
		pols, err := st.policies.NetworkPolicies(p.Namespace).List(labels.Everything())
		if err != nil {
			st.log.Error(err, "Listing the policies of a changed pod's namespace; the periodic resync syncs them", "pod", p.Namespace+"/"+p.Name)
		}
		for _, pol := range pols {
			sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
			if err != nil || sel.Matches(labels.Set(p.Labels)) {
				keys = append(keys, policyKey(netpol.PolicyName(pol)))
			}
		}
		np := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
		for _, k := range st.index.Matching(st.handlerNamespace(p.Namespace), &np) {
			peers[k] = true
		}
	}
	keys = append(keys, peerKeys(slices.Collect(maps.Keys(peers)))...)
	if len(versions) > 0 {
		for _, p := range st.index.NamedEgressPolicies() {
			keys = append(keys, policyKey(p))
		}
	}
	return keys
}

// handlerNamespace is what a handler needs of namespace name; one the cache does not have
// (yet) has no labels, and its own event follows.
func (st *netpolState) handlerNamespace(name string) netpol.Namespace {
	ns := netpol.Namespace{Name: name}
	if n, err := st.namespaces.Get(name); err == nil {
		ns.Labels = n.Labels
	}
	return ns
}

// rowAdded returns the policies and peers of a pod whose port appeared in the NB: a port
// group references its pods' ports by UUID, so it must be synced once the port exists.
func (r *policyReconciler) rowAdded(m model.Model) []nb.Key {
	lsp, ok := m.(*nbdb.LogicalSwitchPort)
	if !ok || lsp.ExternalIDs[nb.RoleKey] != string(nb.PodPort) {
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(lsp.ExternalIDs[nb.NameKey])
	if err != nil {
		return nil
	}
	p, err := r.pods.Pods(ns).Get(name)
	if err != nil {
		return nil // gone: its delete event found the keys
	}
	return r.podChanged(p)
}

// prime records the peers of every policy before any sync runs, so that no peer sync
// deletes an address set a policy about to be synced uses.
func (r *policyReconciler) prime(context.Context) error {
	pols, err := r.policies.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, p := range pols {
		peers, err := netpol.PolicyPeers(p)
		if err != nil {
			continue // its sync reports it
		}
		r.commit(netpol.PolicyName(p), peers, netpol.HasNamedEgressPorts(p))
	}
	return nil
}

// committedPeers are the peers of a policy's committed rows, and whether it has named
// egress ports.
type committedPeers struct {
	peers       []netpol.Peer
	namedEgress bool
}

// prepare records in the index that policy key is about to use peers, besides the peers of
// its committed rows: a peer's sync finds the peer, and no peer the NB's rows still name is
// released. It returns the peers released: those of an earlier attempt whose transaction
// failed, which no committed row names.
func (st *netpolState) prepare(key string, peers []netpol.Peer, namedEgress bool) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.committed[key]
	union := slices.Clone(c.peers)
	for _, p := range peers {
		if !slices.ContainsFunc(union, func(q netpol.Peer) bool { return q.Key() == p.Key() }) {
			union = append(union, p)
		}
	}
	return st.index.Set(key, union, namedEgress || c.namedEgress)
}

// commit records in the index that policy key's rows in the NB name peers (none: it has
// none), once they are committed, and returns the peers no policy uses any more.
func (st *netpolState) commit(key string, peers []netpol.Peer, namedEgress bool) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.committed == nil {
		st.committed = map[string]committedPeers{}
	}
	if len(peers) == 0 && !namedEgress {
		delete(st.committed, key)
	} else {
		st.committed[key] = committedPeers{peers: peers, namedEgress: namedEgress}
	}
	return st.index.Set(key, peers, namedEgress)
}

func (*policyReconciler) kind() nb.Kind { return nb.NetworkPolicy }

// batchSize: the start-up batch converges the policies after their peers, whose address
// sets their ACLs name (make bench-netpol measures the size).
func (*policyReconciler) batchSize() int { return 200 }

// group serializes the syncs of one namespace's policies: a pod moves only between policies
// of its own namespace, and handOver orders those policies' writes by reading each other's
// port groups.
func (*policyReconciler) group(key string) string {
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	return ns
}

func (r *policyReconciler) keys() ([]string, error) {
	return keysOf(r.policies.List(labels.Everything()))
}

// desired translates one policy. It needs the address sets of its peers first (its ACLs
// name them); the peers it no longer uses are synced after (and deleted, if no other policy
// uses them). A policy the translator cannot express exactly gets an Event and fails closed.
func (r *policyReconciler) desired(ctx context.Context, key string) (desire, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return desire{keep: true}, nil // not a key we made
	}
	pol, err := r.policies.NetworkPolicies(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Its peers are released once its ACLs, which name them, are gone.
		return desire{afterCommit: func(*nb.Plan) ([]nb.Key, error) {
			return peerKeys(r.commit(key, nil, false)), nil
		}}, nil
	}
	if err != nil {
		return desire{}, err
	}
	out, err := r.translate(ctx, pol)
	if err != nil {
		return desire{}, err
	}
	handOver, kept, err := r.readHandOver(ctx, key, pol, out.Rows)
	if err != nil {
		return desire{}, err
	}
	// The index learns the new peers now (the syncs of their address sets, run first, read
	// them there) and lets go of the old ones only once the rows naming them are gone: after
	// a failed transaction they are still named, and the retry releases them.
	named := netpol.HasNamedEgressPorts(pol)
	stale := r.prepare(key, out.Peers, named)
	needs := handOver
	for _, p := range out.Peers {
		if r.rows.Get(ctx, &nbdb.AddressSet{Name: p.AddressSetName()}) != nil {
			needs = append(needs, peerKey(p.Key()))
		}
	}
	return desire{rows: out.Rows, syncFirst: needs, afterCommit: func(*nb.Plan) ([]nb.Key, error) {
		keys := peerKeys(append(stale, r.commit(key, out.Peers, named)...))
		if kept {
			keys = append(keys, policyKey(key)) // the pods kept for now leave on the next sync
		}
		return keys, nil
	}}, nil
}

// handOverSnapshot is what handOver reads of the NB and the caches: the port groups of a
// namespace's policies in the NB, by name, and the pods of the ports leaving one of them,
// by port UUID (a port whose pod is gone or finished has none).
type handOverSnapshot struct {
	groups map[string]*nbdb.PortGroup
	pods   map[string]*corev1.Pod
}

// readHandOver reads what handOver needs for policy key (rows its desired rows, others the
// policies of its namespace) and returns what handOver returns.
func (r *policyReconciler) readHandOver(ctx context.Context, key string, pol *networkingv1.NetworkPolicy, rows []nb.Row) ([]nb.Key, bool, error) {
	pg := desiredPortGroup(key, rows)
	if pg == nil {
		return nil, false, nil
	}
	snap := handOverSnapshot{groups: map[string]*nbdb.PortGroup{}, pods: map[string]*corev1.Pod{}}
	cur, err := r.portGroup(ctx, pg.Name)
	if err != nil || cur == nil {
		return nil, false, err
	}
	snap.groups[pg.Name] = cur
	others, err := r.policies.NetworkPolicies(pol.Namespace).List(labels.Everything())
	if err != nil {
		return nil, false, fmt.Errorf("list policies of namespace %s: %w", pol.Namespace, err)
	}
	leaving := false
	for _, port := range cur.Ports {
		if slices.Contains(pg.Ports, port) {
			continue
		}
		leaving = true
		pod, err := r.portPod(ctx, port)
		if err != nil {
			return nil, false, err
		}
		if pod != nil {
			snap.pods[port] = pod
		}
	}
	if leaving {
		for _, o := range others {
			name := netpol.PortGroupName(netpol.PolicyName(o))
			if _, read := snap.groups[name]; read {
				continue
			}
			opg, err := r.portGroup(ctx, name)
			if err != nil {
				return nil, false, err
			}
			if opg != nil {
				snap.groups[name] = opg
			}
		}
	}
	needs, keep := handOver(key, pg, others, snap, func(k nb.Key) bool { return syncing(ctx, k) })
	pg.Ports = append(pg.Ports, keep...)
	return needs, len(keep) > 0, nil
}

// desiredPortGroup is policy key's port group among its desired rows, or nil.
func desiredPortGroup(key string, rows []nb.Row) *nbdb.PortGroup {
	for _, row := range rows {
		if m, ok := row.Model.(*nbdb.PortGroup); ok && m.Name == netpol.PortGroupName(key) {
			return m
		}
	}
	return nil
}

// handOver makes a pod that moves from policy key to another (its labels changed) join the
// other's port group before it leaves key's: add before remove, so that no committed NB
// state has it in no policy's port group, unisolated. pg is key's desired port group,
// others the policies of its namespace, snap the NB as it is; syncing tells the policies
// being synced in this chain. It returns the policies that select a pod leaving pg and do
// not hold it yet, for the runtime to sync first, and the ports pg keeps for now: a pod
// whose new policy is itself waiting for this sync (two policies swapping pods) cannot be
// handed over this time, so it stays, over-isolated rather than open, and the next sync of
// key removes it. It reads nothing but its arguments.
func handOver(key string, pg *nbdb.PortGroup, others []*networkingv1.NetworkPolicy, snap handOverSnapshot, syncing func(nb.Key) bool) (needs []nb.Key, keep []string) {
	cur := snap.groups[pg.Name]
	if cur == nil {
		return nil, nil
	}
	for _, port := range cur.Ports {
		if slices.Contains(pg.Ports, port) {
			continue
		}
		pod := snap.pods[port]
		if pod == nil {
			continue // gone or finished: it leaves every policy
		}
		for _, o := range others {
			name := netpol.PolicyName(o)
			sel, err := metav1.LabelSelectorAsSelector(&o.Spec.PodSelector)
			if name == key || err != nil || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if opg := snap.groups[netpol.PortGroupName(name)]; opg != nil && slices.Contains(opg.Ports, port) {
				continue // already there
			}
			if syncing(policyKey(name)) {
				if !slices.Contains(keep, port) {
					keep = append(keep, port)
				}
				continue
			}
			if !slices.Contains(needs, policyKey(name)) {
				needs = append(needs, policyKey(name))
			}
		}
	}
	return needs, keep
}

// portGroup returns the port group called name in the NB, or nil.
func (r *policyReconciler) portGroup(ctx context.Context, name string) (*nbdb.PortGroup, error) {
	pg := &nbdb.PortGroup{Name: name}
	switch err := r.rows.Get(ctx, pg); {
	case errors.Is(err, client.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("port group %s: %w", name, err)
	}
	return pg, nil
}

// portPod returns the pod whose port has UUID port, if the port is a pod's and the pod still
// needs a network.
func (r *policyReconciler) portPod(ctx context.Context, port string) (*corev1.Pod, error) {
	lsp := &nbdb.LogicalSwitchPort{UUID: port}
	switch err := r.rows.Get(ctx, lsp); {
	case errors.Is(err, client.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("port %s: %w", port, err)
	}
	if lsp.ExternalIDs[nb.RoleKey] != string(nb.PodPort) {
		return nil, nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(lsp.ExternalIDs[nb.NameKey])
	if err != nil {
		return nil, nil
	}
	pod, err := r.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !wantsNetwork(pod)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// translate returns the rows of pol. A policy the translator cannot express gets an Event,
// and its rows fail closed; a read error is returned.
func (r *policyReconciler) translate(ctx context.Context, pol *networkingv1.NetworkPolicy) (netpol.Output, error) {
	logging, err := r.namespaceLogging(pol.Namespace)
	if err != nil {
		return netpol.Output{}, err
	}
	pods, err := r.selectedPods(ctx, pol)
	if err != nil {
		return netpol.Output{}, err
	}
	// The nodes' addresses, which an ingress ipBlock leaves out (netpol.Input.NodeIPs).
	var nodeIPs []netip.Addr
	if hasIngressIPBlock(pol) {
		nodes, err := r.nodes.List(labels.Everything())
		if err != nil {
			return netpol.Output{}, fmt.Errorf("list nodes: %w", err)
		}
		nodeIPs = svcmodel.NodeIPs(nodes)
	}
	// The translation may take half of what is left of the sync's time: the rest is for
	// the rows that fail closed, and their transaction, should it run out.
	tctx, cancel := halfOfDeadline(ctx)
	defer cancel()
	in := netpol.Input{
		Policy:     pol,
		Pods:       pods,
		Logging:    logging,
		Management: r.mgmtMatch,
		// Cluster-internal sources that are not pods: never "outside" for an ipBlock.
		Internal: []netip.Prefix{r.cfg.JoinSubnet},
		NodeIPs:  nodeIPs,
		PeerPods: func(p netpol.Peer) ([]netpol.Pod, error) { return r.peerPods(tctx, p) },
		AllPods:  func() ([]netpol.Pod, error) { return r.allPods(tctx) },
		MaxSize:  r.cfg.MaxPolicySize,
	}
	tr := translateBounded
	if r.translatePolicy != nil {
		tr = r.translatePolicy
	}
	out, err := tr(tctx, in)
	if tctx.Err() != nil && ctx.Err() == nil {
		// Too large to translate in the sync's time (audit-2 H2): it fails closed, as a
		// policy over --max-policy-size does, rather than hold a worker at every retry.
		r.warn(pol, ReasonInvalidNetworkPolicy, "its translation did not finish within half the sync timeout (--sync-timeout); the pods it selects get no allow rule from it")
		in.Policy, in.Management = denyOnly(pol), ""
		out, _ = netpol.Translate(ctx, in) // no rule, no peer: only the selected pods' drops
		return out, nil
	}
	if _, unread := errors.AsType[*netpol.ReadError](err); unread {
		return netpol.Output{}, fmt.Errorf("policy %s: %w", netpol.PolicyName(pol), err)
	}
	if err != nil {
		r.warn(pol, ReasonInvalidNetworkPolicy, "%v; the pods it selects get no allow rule from it", err)
	}
	return out, nil
}

// translateBounded is netpol.Translate, which stops when ctx ends.
func translateBounded(ctx context.Context, in netpol.Input) (netpol.Output, error) {
	return netpol.Translate(ctx, in)
}

// halfOfDeadline returns ctx with a deadline halfway to ctx's (unchanged without one).
func halfOfDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(d)/2)
}

// denyOnly is p without its rules: of its policy types, only the drops, which isolate the
// pods it selects (a policy that fails closed).
func denyOnly(p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	ingress, egress := netpol.PolicyTypes(p)
	q := *p
	q.Spec.Ingress, q.Spec.Egress, q.Spec.PolicyTypes = nil, nil, nil
	if ingress {
		q.Spec.PolicyTypes = append(q.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	if egress {
		q.Spec.PolicyTypes = append(q.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	return &q
}

// namespaceLogging is the ACL logging of namespace ns; an unusable annotation means none
// (the namespace handler reported it).
func (r *policyReconciler) namespaceLogging(ns string) (netpol.Logging, error) {
	n, err := r.namespaces.Get(ns)
	if apierrors.IsNotFound(err) {
		return netpol.Logging{}, nil
	}
	if err != nil {
		return netpol.Logging{}, fmt.Errorf("get namespace %s: %w", ns, err)
	}
	logging, _ := netpol.ParseLogging(n.Annotations[netpol.LoggingAnnotation])
	return logging, nil
}

// selectedPods returns the pods of pol's namespace that its podSelector selects: the ones
// the translation keeps of netpol.Input.Pods. Only those are converted; a selector that
// does not parse selects none (the translation reports it).
func (r *policyReconciler) selectedPods(ctx context.Context, pol *networkingv1.NetworkPolicy) ([]netpol.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
	if err != nil {
		return nil, nil
	}
	pods, err := r.pods.Pods(pol.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list pods of namespace %s: %w", pol.Namespace, err)
	}
	return r.policyPods(ctx, pods)
}

func (*peerReconciler) kind() nb.Kind { return nb.NetworkPolicyPeer }

func (*peerReconciler) batchSize() int { return 200 }

// keys are the peers some policy uses; the address sets of the others are in the NB only,
// and the runtime enqueues them from there.
func (r *peerReconciler) keys() ([]string, error) { return r.index.Peers(), nil }

// desired returns a peer's address set.
func (r *peerReconciler) desired(ctx context.Context, key string) (desire, error) {
	peer, ok := r.index.Peer(key)
	if !ok {
		return desire{}, nil
	}
	pods, err := r.peerPods(ctx, peer)
	if err != nil {
		return desire{}, err
	}
	return desire{rows: []nb.Row{netpol.PeerRow(peer, pods)}}, nil
}

// peerPods returns the pods peer selects.
func (st *netpolState) peerPods(ctx context.Context, peer netpol.Peer) ([]netpol.Pod, error) {
	nss := []string{peer.Namespace}
	if peer.NamespaceSelector != nil {
		all, err := st.namespaces.List(peer.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("list namespaces of peer %s: %w", peer, err)
		}
		nss = nss[:0]
		for _, n := range all {
			nss = append(nss, n.Name)
		}
	}
	var out []netpol.Pod
	for _, ns := range nss {
		pods, err := st.pods.Pods(ns).List(peer.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("list pods of namespace %s for peer %s: %w", ns, peer, err)
		}
		np, err := st.policyPods(ctx, pods)
		if err != nil {
			return nil, err
		}
		out = append(out, np...)
	}
	return out, nil
}

// allPods returns every pod with a network.
func (st *netpolState) allPods(ctx context.Context) ([]netpol.Pod, error) {
	pods, err := st.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return st.policyPods(ctx, pods)
}

// policyPods converts the pods that have a network (see policyPod).
func (st *netpolState) policyPods(ctx context.Context, pods []*corev1.Pod) ([]netpol.Pod, error) {
	out := make([]netpol.Pod, 0, len(pods))
	for _, p := range pods {
		np, ok, err := st.policyPod(ctx, p)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, np)
		}
	}
	return out, nil
}

// policyPod is what the translation needs of p; ok is false for a pod that has no network or
// has finished. Its address is the one the master holds for it (IPAM, rebuilt from the pod
// ports in NB at start), never the pod-network annotation or status.podIPs: both are
// writable by others (a user, a node), and an address set is where one tenant's addresses
// decide what another tenant's pods accept. A pod the master has given no address yet has
// none here; its policies and peers are synced again when it gets one (the annotation the
// master writes is a pod event).
func (st *netpolState) policyPod(ctx context.Context, p *corev1.Pod) (netpol.Pod, bool, error) {
	if !wantsNetwork(p) {
		return netpol.Pod{}, false, nil
	}
	out := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels,
		Port: contract.PodPort(p.Namespace, p.Name)}
	if node, ip, ok := st.ipam.PodIP(p.Namespace + "/" + p.Name); ok && node == p.Spec.NodeName {
		out.IP = ip
	}
	for _, ctr := range p.Spec.Containers {
		out.Ports = append(out.Ports, ctr.Ports...)
	}
	lsp := &nbdb.LogicalSwitchPort{Name: out.Port}
	switch err := st.rows.Get(ctx, lsp); {
	case errors.Is(err, client.ErrNotFound):
		// No port yet: the NB handler enqueues the pod's policies when it appears.
	case err != nil:
		return netpol.Pod{}, false, fmt.Errorf("port of pod %s/%s: %w", p.Namespace, p.Name, err)
	case lsp.ExternalIDs[nb.NameKey] == p.Namespace+"/"+p.Name:
		out.PortUUID = lsp.UUID
	}
	return out, true, nil
}
