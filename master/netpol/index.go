package netpol

import (
	"maps"
	"slices"
	"sync"
)

// Index records which policies use which peers, so that a pod or namespace change can be
// turned into the few peer and policy keys it affects without translating every policy
// again. It holds the peers by namespace (for the peers of one namespace) and in one set
// (for the peers with a namespace selector), and the policies whose egress rules name
// ports, whose rows depend on the pods of their destinations. It is safe for concurrent use.
//
// The controller updates it on every policy sync and fills it from every policy before the
// first sync: a peer sync deletes the address set of a peer the index does not know, so a
// policy about to be synced must already be in it.
type Index struct {
	mu           sync.Mutex
	peers        map[string]*peerEntry      // by peer key
	byPolicy     map[string][]string        // policy key -> its peer keys
	nsPeers      map[string]map[string]bool // namespace -> keys of the peers of that namespace only
	clusterPeers map[string]bool            // keys of the peers with a namespace selector
	namedEgress  map[string]bool            // keys of the policies with named egress ports
}

// peerEntry is one shared peer and the policies using it.
type peerEntry struct {
	peer     Peer
	policies map[string]bool
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{peers: map[string]*peerEntry{}, byPolicy: map[string][]string{},
		nsPeers: map[string]map[string]bool{}, clusterPeers: map[string]bool{}, namedEgress: map[string]bool{}}
}

// Set records the peers of policy ("namespace/name"; no peers for a deleted policy) and
// whether it has named egress ports. It returns the keys of the peers no policy uses any
// more: their address sets are to be deleted. Setting the same peers again changes nothing.
func (x *Index) Set(policy string, peers []Peer, namedEgress bool) (released []string) {
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

// Peer returns the peer of key; ok is false when no policy uses it.
func (x *Index) Peer(key string) (p Peer, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.peers[key]
	if !ok {
		return Peer{}, false
	}
	return e.peer, true
}

// Matching returns the keys of the peers that select pod (in ns), or, for pod nil, the
// peers with a namespace selector that select ns.
func (x *Index) Matching(ns Namespace, pod *Pod) []string {
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

// Peers returns the keys of every peer some policy uses.
func (x *Index) Peers() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Keys(x.peers))
}

// NamedEgressPolicies returns the keys of the policies with named egress ports: any pod
// change may change their rows.
func (x *Index) NamedEgressPolicies() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Keys(x.namedEgress))
}
