package netpol

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// ACL priorities. Every policy selecting a pod adds its own drop below its allows, so a
// packet passes when any policy allows it.
const (
	PriorityDeny  = 1000
	PriorityAllow = 1001
)

// PolicyKey is the external_ids key naming the policy ("namespace/name") on its port group,
// for operators; the owner marks carry the same.
const PolicyKey = "k8s.ovn-transparent.io/policy"

// LoggingAnnotation is the Namespace annotation that turns on ACL logging for its policies.
const LoggingAnnotation = "k8s.ovn-transparent.io/acl-logging"

// Logging is the parsed LoggingAnnotation: the severity allowed and denied connections are
// logged with, "" for not logged.
type Logging struct {
	Allow string `json:"allow,omitempty"`
	Deny  string `json:"deny,omitempty"`
}

var severities = []string{nbdb.ACLSeverityAlert, nbdb.ACLSeverityWarning, nbdb.ACLSeverityNotice,
	nbdb.ACLSeverityInfo, nbdb.ACLSeverityDebug}

// ParseLogging reads a LoggingAnnotation value, e.g. {"allow":"info","deny":"warning"}.
func ParseLogging(s string) (Logging, error) {
	var l Logging
	if s == "" {
		return l, nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&l); err != nil {
		return Logging{}, fmt.Errorf("%s: %w", LoggingAnnotation, err)
	}
	for _, sev := range []string{l.Allow, l.Deny} {
		if sev != "" && !slices.Contains(severities, sev) {
			return Logging{}, fmt.Errorf("%s: severity %q is not one of %v", LoggingAnnotation, sev, severities)
		}
	}
	return l, nil
}

// MeterName is the meter that rate-limits the log messages of logged ACLs: a flood of
// denied packets must not become a flood of log lines on every chassis.
const MeterName = "acl-logging"

// MeterRows are the cluster's meter for logged ACLs: MeterRate messages per second, with
// bursts of MeterBurst.
func MeterRows() []nb.Row {
	meter := nb.NewID(nb.Cluster, nb.ClusterName, nb.ACLLogMeter)
	fair := true
	return []nb.Row{
		{ID: meter, Model: &nbdb.Meter{Name: MeterName, Unit: nbdb.MeterUnitPktps, Fair: &fair}},
		{ID: nb.NewID(nb.Cluster, nb.ClusterName, nb.ACLLogMeterBand), Parent: meter,
			Model: &nbdb.MeterBand{Action: nbdb.MeterBandActionDrop, Rate: MeterRate, BurstSize: MeterBurst}},
	}
}

// The log rate of logged ACLs, per chassis and ACL (the meter is fair).
const (
	MeterRate  = 20
	MeterBurst = 100
)

// Input is everything one policy's rows depend on.
type Input struct {
	Policy *networkingv1.NetworkPolicy
	// Pods are the pods of the policy's namespace (the translation picks those its
	// podSelector selects).
	Pods    []Pod
	Logging Logging
	// Management is the match of the management ports' addresses (ManagementMatch).
	Management string
	// Internal are the ranges inside the cluster that are not pod addresses (the gateway
	// routers' join subnet, whose addresses are the source of load-balanced traffic a
	// gateway router SNATs), and NodeIPs the nodes' addresses (the source a gateway router
	// keeps for a NodePort with externalTrafficPolicy Local when the client is a pod, SNATed
	// by its own node's router, or a node). An ingress ipBlock does not cover them
	// (ipBlockMatch).
	Internal []netip.Prefix
	NodeIPs  []netip.Addr
	// PeerPods returns the pods a peer selects, and AllPods every pod: the destinations
	// named ports of egress rules are resolved on. Either may be nil when the policy has no
	// egress rule with a named port. An error they return makes Translate fail with a
	// *ReadError.
	PeerPods func(Peer) ([]Pod, error)
	AllPods  func() ([]Pod, error)
	// MaxSize bounds the policy's size: its ACLs, the peer address sets it names and the
	// address prefixes its ipBlocks become (Output.Size). A larger policy fails closed like
	// one that cannot be expressed (audit M5: a namespace user writes policies, and every
	// rule, peer, named port's number and prefix costs rows and flows on every node; one
	// ipBlock with 5,000 excepts was ~97,000 prefixes, security audit 2). 0: no limit.
	MaxSize int
}

// DefaultMaxSize is the default of Input.MaxSize (ovnt-master --max-policy-size). An ingress
// ipBlock from 0.0.0.0/0 becomes about 40 prefixes with the nodes' addresses together in
// one subnet, 880 with 100 nodes and 3,100 with 500 nodes strewn over a /16 (the ipBlock
// leaves out every node's address, Input.NodeIPs); the audit's 5,000 excepts are ~97,800.
const DefaultMaxSize = 5000

// ReadError says Translate could not read the pods a policy's rows depend on (Input.PeerPods
// or Input.AllPods failed), or was stopped (its context ended: the sync's deadline). The rows
// are then unknown, not empty, and Translate returns none: the caller retries. Applying "no
// pods" instead would empty the policy's port group, and its drop ACLs would match nobody:
// the policy would fail open.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "policy rows unknown: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Output is one policy's rows.
type Output struct {
	Rows []nb.Row
	// Peers are the address sets the ACLs reference; they must exist before the ACLs.
	Peers []Peer
	// Selected are the pods the policy selects.
	Selected []Pod
	// Size is what Input.MaxSize bounds: ACLs, peer address sets and ipBlock prefixes, as
	// far as the translation went (it stops past MaxSize).
	Size int
}

// PolicyName is "namespace/name", the owner key of a policy.
func PolicyName(p *networkingv1.NetworkPolicy) string { return p.Namespace + "/" + p.Name }

// PortGroupName is the name of a policy's port group: OVN names allow no "-" or "/".
func PortGroupName(policy string) string {
	sum := sha256.Sum256([]byte(policy))
	return "np_" + hex.EncodeToString(sum[:8])
}

// PolicyTypes returns whether the policy isolates its pods for ingress and for egress,
// with the API's defaults when policyTypes is empty.
func PolicyTypes(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// PolicyPeers returns the pod peers of the policy's rules (of the types it has).
func PolicyPeers(p *networkingv1.NetworkPolicy) ([]Peer, error) {
	ingress, egress := PolicyTypes(p)
	var out []Peer
	seen := map[string]bool{}
	add := func(peers []networkingv1.NetworkPolicyPeer) error {
		for _, pe := range peers {
			if pe.IPBlock != nil {
				continue
			}
			peer, err := NewPeer(p.Namespace, pe.NamespaceSelector, pe.PodSelector)
			if err != nil {
				return err
			}
			if !seen[peer.Key()] {
				seen[peer.Key()] = true
				out = append(out, peer)
			}
		}
		return nil
	}
	if ingress {
		for _, r := range p.Spec.Ingress {
			if err := add(r.From); err != nil {
				return nil, err
			}
		}
	}
	if egress {
		for _, r := range p.Spec.Egress {
			if err := add(r.To); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// HasNamedEgressPorts reports whether an egress rule names a port: its rows then depend on
// the pods of its peers, not just their addresses.
func HasNamedEgressPorts(p *networkingv1.NetworkPolicy) bool {
	if _, egress := PolicyTypes(p); !egress {
		return false
	}
	for _, r := range p.Spec.Egress {
		for _, port := range r.Ports {
			if port.Port != nil && port.Port.Type == intstr.String {
				return true
			}
		}
	}
	return false
}

// ManagementMatch is the match of a packet from the management port of the node the
// destination pod is on (kubelet probes), for an ACL of that pod's node switch: the address
// of every node's management port (contract.ManagementAddresses, one masked address for all
// node subnets of nodeBits in the cluster CIDR) and the MAC derived from it
// (contract.MACFromIP), masked the same way. The MAC is what ties the packet to the pod's own
// node: a logical router rewrites eth.src to its own port's MAC, so a packet another node's
// management port (or anything beyond a router) sent reaches the pod's switch with the
// router's MAC; pods' ports are locked to their own MACs and the management port to its own
// (port security), so only the switch's own management port can send the management MAC.
func ManagementMatch(cluster netip.Prefix, nodeBits int) string {
	addr, mask := contract.ManagementAddresses(cluster, nodeBits)
	m := mask.As4()
	macMask := net.HardwareAddr{0xff, 0xff, m[0], m[1], m[2], m[3]}
	return fmt.Sprintf("ip4.src == %s/%s && eth.src == %s/%s", addr, mask, contract.MACFromIP(addr), macMask)
}

// translator builds one policy's rows.
type translator struct {
	ctx      context.Context
	in       Input
	terms    int // the prefixes of the ipBlocks translated so far
	key      string
	pg       nb.ID
	pgName   string
	acls     []nb.Row
	peers    []Peer
	selected []Pod
}

// Translate returns the rows of in.Policy. When the policy cannot be expressed exactly, or is
// larger than in.MaxSize, the error says why and the rows fail closed: the port group of the
// pods it selects with only the drop ACLs of its policy types. When reading pods failed, or
// ctx ended first, the error is a *ReadError and the Output is empty: there is nothing to
// apply.
func Translate(ctx context.Context, in Input) (Output, error) {
	p := in.Policy
	t := &translator{ctx: ctx, in: in, key: PolicyName(p), pgName: PortGroupName(PolicyName(p))}
	t.pg = nb.NewID(nb.NetworkPolicy, t.key, nb.PolicyPods)
	// A selector that does not parse (a legacy object the API server's ratcheting kept)
	// selects every pod of the namespace: it fails closed like any other policy that cannot
	// be expressed, rather than selecting nothing and leaving its pods open (audit L3).
	sel, selErr := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if selErr != nil {
		sel = labels.Everything()
	}
	for _, pod := range in.Pods {
		if pod.Namespace == p.Namespace && sel.Matches(labels.Set(pod.Labels)) {
			t.selected = append(t.selected, pod)
		}
	}
	ingress, egress := PolicyTypes(p)
	if ingress {
		t.acl("ingress-deny", false, PriorityDeny, nbdb.ACLActionDrop, "outport == @"+t.pgName+" && ip")
	}
	if egress {
		t.acl("egress-deny", true, PriorityDeny, nbdb.ACLActionDrop, "inport == @"+t.pgName+" && ip")
	}
	denyOnly := slices.Clone(t.acls)
	err := selErr
	if err == nil {
		err = t.allows(ingress, egress)
	}
	if err == nil {
		err = t.checkSize()
	}
	if _, unread := errors.AsType[*ReadError](err); unread {
		return Output{}, err
	}
	size := t.size()
	if err != nil {
		t.acls, t.peers = denyOnly, nil
	}
	return Output{Rows: append([]nb.Row{t.pgRow()}, t.acls...), Peers: t.peers, Selected: t.selected, Size: size}, err
}

// size is what the translation has made so far, as Input.MaxSize counts it.
func (t *translator) size() int { return len(t.acls) + len(t.peers) + t.terms }

// checkSize fails when the translation so far is past Input.MaxSize, and when ctx has
// ended (a *ReadError). It is called after each rule and each ipBlock, so that an oversized
// policy stops before the rest of it is built.
func (t *translator) checkSize() error {
	if err := t.ctx.Err(); err != nil {
		return &ReadError{Err: fmt.Errorf("translation stopped: %w", err)}
	}
	if n := t.size(); t.in.MaxSize > 0 && n > t.in.MaxSize {
		return fmt.Errorf("%d ACLs, peer address sets and ipBlock prefixes (so far) exceed the limit of %d per policy (--max-policy-size)", n, t.in.MaxSize)
	}
	return nil
}

func (t *translator) pgRow() nb.Row {
	var ports []string
	for _, pod := range t.selected {
		if pod.PortUUID != "" {
			ports = append(ports, pod.PortUUID)
		}
	}
	slices.Sort(ports)
	return nb.Row{ID: t.pg, Model: &nbdb.PortGroup{
		Name:        t.pgName,
		Ports:       ports,
		ExternalIDs: map[string]string{PolicyKey: t.key},
	}}
}

// acl adds one ACL of the policy's port group.
func (t *translator) acl(rule string, egress bool, priority int, action, match string) {
	name := t.key + "/" + rule
	if len(name) > 63 {
		name = name[:63]
	}
	a := &nbdb.ACL{Name: &name, Priority: priority, Action: action, Match: match,
		Direction: nbdb.ACLDirectionToLport}
	if egress {
		// After the load balancers: a pod talking to a Service is judged on the backend.
		a.Direction = nbdb.ACLDirectionFromLport
		a.Options = map[string]string{"apply-after-lb": "true"}
	}
	sev := t.in.Logging.Allow
	if action == nbdb.ACLActionDrop {
		sev = t.in.Logging.Deny
	}
	if sev != "" {
		a.Log = true
		a.Severity = &sev
		meter := MeterName
		a.Meter = &meter
	}
	t.acls = append(t.acls, nb.Row{
		ID:     nb.NewID(nb.NetworkPolicy, t.key, nb.PolicyACL).WithScope(rule),
		Model:  a,
		Parent: t.pg,
	})
}

func (t *translator) allows(ingress, egress bool) error {
	if ingress {
		if t.in.Management != "" {
			t.acl("ingress-mgmt", false, PriorityAllow, nbdb.ACLActionAllowRelated,
				"outport == @"+t.pgName+" && "+t.in.Management)
		}
		for i, r := range t.in.Policy.Spec.Ingress {
			if err := t.rule(fmt.Sprintf("ingress-%d", i), false, r.From, r.Ports); err != nil {
				return fmt.Errorf("ingress rule %d: %w", i, err)
			}
			if err := t.checkSize(); err != nil {
				return err
			}
		}
	}
	if egress {
		for i, r := range t.in.Policy.Spec.Egress {
			if err := t.rule(fmt.Sprintf("egress-%d", i), true, r.To, r.Ports); err != nil {
				return fmt.Errorf("egress rule %d: %w", i, err)
			}
			if err := t.checkSize(); err != nil {
				return err
			}
		}
	}
	return nil
}

// namedPort is a named port of a rule with its protocol.
type namedPort struct{ proto, name string }

// resolved is a named port resolved on one destination: protocol and number.
type resolved struct {
	proto string
	port  int32
}

// rule adds the ACLs of one rule: one for its numbered ports (or all ports), and one per
// number its named ports resolve to on the destination pods.
func (t *translator) rule(rule string, egress bool, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) error {
	self, other := "outport == @"+t.pgName, "src"
	if egress {
		self, other = "inport == @"+t.pgName, "dst"
	}
	peerExpr, podPeers, err := t.peerMatch(other, peers)
	if err != nil {
		return err
	}
	numbered, named, err := splitPorts(ports)
	if err != nil {
		return err
	}
	if len(ports) == 0 || len(numbered) > 0 {
		t.acl(rule, egress, PriorityAllow, nbdb.ACLActionAllowRelated, join(self, peerExpr, or(numbered)))
	}
	if len(named) == 0 {
		return nil
	}
	dests, err := t.namedPortDestinations(egress, peers, podPeers)
	if err != nil {
		return err
	}
	groups := resolveNamedPorts(named, dests, egress)
	for _, r := range slices.SortedFunc(maps.Keys(groups), func(a, b resolved) int {
		return cmp.Or(cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port))
	}) {
		members := slices.Compact(slices.Sorted(slices.Values(groups[r])))
		dest := "outport == {" + strings.Join(members, ", ") + "}"
		if egress {
			dest = "ip4.dst == {" + strings.Join(members, ", ") + "}"
		}
		// For egress the destination is a pod peer's address; an ipBlock peer names no
		// port, so only the pod peers (or any destination when the rule has no peer) count.
		pe := peerExpr
		if egress {
			pe = ""
		}
		t.acl(fmt.Sprintf("%s-named-%s-%d", rule, r.proto, r.port), egress, PriorityAllow, nbdb.ACLActionAllowRelated,
			join(self, dest, pe, fmt.Sprintf("%s.dst == %d", r.proto, r.port)))
	}
	return nil
}

// splitPorts turns a rule's ports into the match of each numbered port (or port range, or
// whole protocol) and the named ports, which only the destination pods can resolve.
func splitPorts(ports []networkingv1.NetworkPolicyPort) (numbered []string, named []namedPort, err error) {
	for _, pp := range ports {
		proto := corev1.ProtocolTCP
		if pp.Protocol != nil {
			proto = *pp.Protocol
		}
		l4, err := l4Name(proto)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case pp.Port == nil:
			if pp.EndPort != nil {
				return nil, nil, fmt.Errorf("endPort without port")
			}
			numbered = append(numbered, l4)
		case pp.Port.Type == intstr.String:
			if pp.EndPort != nil {
				return nil, nil, fmt.Errorf("endPort with the named port %q", pp.Port.StrVal)
			}
			named = append(named, namedPort{proto: l4, name: pp.Port.StrVal})
		default:
			n := pp.Port.IntVal
			if n < 1 || n > 65535 {
				return nil, nil, fmt.Errorf("port %d out of range", n)
			}
			if pp.EndPort == nil {
				numbered = append(numbered, fmt.Sprintf("%s.dst == %d", l4, n))
				continue
			}
			if *pp.EndPort < n || *pp.EndPort > 65535 {
				return nil, nil, fmt.Errorf("endPort %d below port %d or out of range", *pp.EndPort, n)
			}
			numbered = append(numbered, fmt.Sprintf("(%s.dst >= %d && %s.dst <= %d)", l4, n, l4, *pp.EndPort))
		}
	}
	return numbered, named, nil
}

// namedPortDestinations are the pods a rule's named ports are resolved on: the selected pods
// for ingress; for egress the pods of its pod peers, or every pod when it has no peer. A
// failed read is a *ReadError: resolving on fewer pods would silently drop allow rules.
func (t *translator) namedPortDestinations(egress bool, peers []networkingv1.NetworkPolicyPeer, podPeers []Peer) ([]Pod, error) {
	if !egress {
		return t.selected, nil
	}
	if len(peers) == 0 {
		if t.in.AllPods == nil {
			return nil, nil
		}
		dests, err := t.in.AllPods()
		if err != nil {
			return nil, &ReadError{Err: err}
		}
		return dests, nil
	}
	if t.in.PeerPods == nil {
		return nil, nil
	}
	var dests []Pod
	for _, p := range podPeers {
		pods, err := t.in.PeerPods(p)
		if err != nil {
			return nil, &ReadError{Err: fmt.Errorf("pods of peer %s: %w", p, err)}
		}
		dests = append(dests, pods...)
	}
	return dests, nil
}

// resolveNamedPorts groups the destinations by the number each named port has on them: for
// egress their addresses, for ingress their logical ports (only those already in the NB).
func resolveNamedPorts(named []namedPort, dests []Pod, egress bool) map[resolved][]string {
	groups := map[resolved][]string{}
	for _, pod := range dests {
		for _, np := range named {
			for _, cp := range pod.Ports {
				proto, err := l4Name(cmp.Or(cp.Protocol, corev1.ProtocolTCP))
				if err != nil || cp.Name != np.name || proto != np.proto {
					continue
				}
				r := resolved{proto, cp.ContainerPort}
				if egress {
					if pod.IP.IsValid() {
						groups[r] = append(groups[r], pod.IP.String())
					}
				} else if pod.PortUUID != "" {
					groups[r] = append(groups[r], strconv.Quote(pod.Port))
				}
			}
		}
	}
	return groups
}

// peerMatch returns the match of a rule's peers on the other end's address (src or dst),
// "" for any peer, and the rule's pod peers.
func (t *translator) peerMatch(dir string, peers []networkingv1.NetworkPolicyPeer) (string, []Peer, error) {
	var terms []string
	var podPeers []Peer
	for _, pe := range peers {
		if pe.IPBlock != nil {
			if pe.PodSelector != nil || pe.NamespaceSelector != nil {
				return "", nil, fmt.Errorf("a peer with an ipBlock and a selector")
			}
			term, err := t.ipBlockMatch(dir, pe.IPBlock)
			if err == nil {
				err = t.checkSize()
			}
			if err != nil {
				return "", nil, err
			}
			terms = append(terms, term)
			continue
		}
		p, err := NewPeer(t.in.Policy.Namespace, pe.NamespaceSelector, pe.PodSelector)
		if err != nil {
			return "", nil, err
		}
		podPeers = append(podPeers, p)
		if !slices.ContainsFunc(t.peers, func(q Peer) bool { return q.Key() == p.Key() }) {
			t.peers = append(t.peers, p)
		}
		terms = append(terms, "ip4."+dir+" == $"+p.AddressSetName())
	}
	return or(terms), podPeers, nil
}

// ipBlockMatch is the match of an ipBlock on the other end's address (src or dst): its
// CIDR less its except ranges, as the list of prefixes that remain. (A negation such as
// "ip4.src != {...}" costs OVN one flow per bit of every excluded prefix, multiplied across
// negations: a few node addresses would make millions of flows.)
//
// For ingress, the cluster's internal sources that are not pods are never "outside": a block
// that covers the join subnet (or part of it) but does not lie inside it leaves it out, and a
// block wider than one address leaves out every node's address. Else a pod that a policy
// refuses would pass an ipBlock that admits the outside by going through a NodePort of
// another node: the gateway router there SNATs it to its join address (externalTrafficPolicy
// Cluster), or passes the address of the pod's own node (Local). A block naming the join
// subnet, or one node's address, keeps it.
func (t *translator) ipBlockMatch(dir string, b *networkingv1.IPBlock) (string, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return "", fmt.Errorf("ipBlock cidr: %w", err)
	}
	cidr = cidr.Masked()
	fam := "ip4"
	if cidr.Addr().Is6() {
		fam = "ip6"
	}
	var except []netip.Prefix
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return "", fmt.Errorf("ipBlock except: %w", err)
		}
		if ex.Addr().Is6() != cidr.Addr().Is6() {
			return "", fmt.Errorf("ipBlock except %s is not of the family of %s", ex, cidr)
		}
		except = append(except, ex.Masked())
	}
	if dir == "src" && cidr.Addr().Is4() {
		for _, r := range t.in.Internal {
			if r.Overlaps(cidr) && !(r.Contains(cidr.Addr()) && cidr.Bits() >= r.Bits()) {
				except = append(except, r.Masked())
			}
		}
		if cidr.Bits() < 32 {
			for _, ip := range t.in.NodeIPs {
				if ip.Is4() {
					except = append(except, netip.PrefixFrom(ip, 32))
				}
			}
		}
	}
	budget := 0 // what MaxSize leaves: no need to compute more than one prefix past it
	if t.in.MaxSize > 0 {
		budget = max(t.in.MaxSize-t.size(), 0) + 1
	}
	left := subtract(cidr, except, budget)
	t.terms += max(len(left), 1)
	if err := t.checkSize(); err != nil {
		return "", err // not worth writing out
	}
	if len(left) == 0 {
		// Everything is excepted: a match no packet has (an empty set would not parse).
		return fmt.Sprintf("(%s.%s == %s && %s.%s != %s)", fam, dir, cidr, fam, dir, cidr), nil
	}
	terms := make([]string, len(left))
	for i, p := range left {
		terms[i] = p.String()
	}
	if len(terms) == 1 {
		return fmt.Sprintf("%s.%s == %s", fam, dir, terms[0]), nil
	}
	return fmt.Sprintf("%s.%s == {%s}", fam, dir, strings.Join(terms, ", ")), nil
}

// subtract returns base less the prefixes of out, as the fewest prefixes in address order:
// the largest aligned blocks the remaining addresses make up. It sorts out once and sweeps it
// (n log n in the excepts, plus the prefixes it returns); splitting base in halves, with
// every except looked at again at each split, took 43 s for 5,000 excepts (security audit
// 2, finding 2). With limit > 0 it stops once it has more than limit prefixes.
func subtract(base netip.Prefix, out []netip.Prefix, limit int) []netip.Prefix {
	var in []netip.Prefix
	for _, o := range out {
		if !o.Overlaps(base) {
			continue
		}
		if o.Bits() <= base.Bits() {
			return nil // o contains base
		}
		in = append(in, o)
	}
	if len(in) == 0 {
		return []netip.Prefix{base}
	}
	// By first address, the wider first: a prefix either holds the ones after it that start
	// inside it or ends before they start.
	slices.SortFunc(in, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	var left []netip.Prefix
	next, end := base.Addr(), lastAddr(base) // next: the first address not yet decided
	for _, o := range in {
		first, last := o.Addr(), lastAddr(o)
		if last.Less(next) {
			continue // inside an except already taken out
		}
		if next.Less(first) {
			left = appendRange(left, base.Bits(), next, first.Prev())
			if limit > 0 && len(left) > limit {
				return left
			}
		}
		if last == end {
			return left
		}
		next = last.Next()
	}
	return appendRange(left, base.Bits(), next, end)
}

// appendRange appends the addresses from lo to hi (inclusive) as the fewest prefixes of at
// least minBits bits: from lo, each time the largest block that starts there and ends by hi.
func appendRange(out []netip.Prefix, minBits int, lo, hi netip.Addr) []netip.Prefix {
	if lo.Is4() {
		return appendRange4(out, minBits, lo.As4(), hi.As4())
	}
	for {
		var p netip.Prefix
		for bits := minBits; bits <= lo.BitLen(); bits++ {
			p = netip.PrefixFrom(lo, bits)
			if p.Masked().Addr() == lo && !hi.Less(lastAddr(p)) {
				break
			}
		}
		out = append(out, p)
		last := lastAddr(p)
		if last == hi {
			return out
		}
		lo = last.Next()
	}
}

// appendRange4 is appendRange for IPv4, in integers: the block at lo has as many host bits
// as lo has trailing zeros, fewer if it would pass hi.
func appendRange4(out []netip.Prefix, minBits int, lo4, hi4 [4]byte) []netip.Prefix {
	lo, hi := uint64(binary.BigEndian.Uint32(lo4[:])), uint64(binary.BigEndian.Uint32(hi4[:]))
	for lo <= hi {
		host := min(bits.TrailingZeros64(lo|1<<32), 32-minBits)
		for lo+1<<host-1 > hi {
			host--
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(lo))
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), 32-host))
		lo += 1 << host
	}
	return out
}

// lastAddr is the last address of prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func l4Name(p corev1.Protocol) (string, error) {
	switch p {
	case corev1.ProtocolTCP:
		return "tcp", nil
	case corev1.ProtocolUDP:
		return "udp", nil
	case corev1.ProtocolSCTP:
		return "sctp", nil
	}
	return "", fmt.Errorf("protocol %q", p)
}

// or joins terms with ||, in parentheses when there are several; "" for none.
func or(terms []string) string {
	switch len(terms) {
	case 0:
		return ""
	case 1:
		return terms[0]
	}
	return "(" + strings.Join(terms, " || ") + ")"
}

// join joins the non-empty terms with &&; with no address term it matches all IP.
func join(self string, terms ...string) string {
	out := []string{self}
	addr := false
	for _, t := range terms {
		if t != "" {
			out = append(out, t)
			addr = addr || strings.Contains(t, "ip4.") || strings.Contains(t, "ip6.")
		}
	}
	if !addr {
		out = slices.Insert(out, 1, "ip")
	}
	return strings.Join(out, " && ")
}
