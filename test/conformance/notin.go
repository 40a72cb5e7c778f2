package conformance

import (
	"fmt"

	"github.com/mattfenwick/cyclonus/pkg/kube"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The oracle's one known fault: cyclonus v0.5.6 (kube.IsMatchExpressionMatchForLabels) says a
// label set without the key does not match `key NotIn [...]`. Kubernetes' selector semantics
// (and k8s.io/apimachinery/pkg/labels, which the master uses) say it matches: NotIn is "the key
// is absent, or its value is not listed".
//
// The correction rewrites the policies the oracle reads, never its code: in cyclonus terms the
// Kubernetes meaning of one NotIn requirement is the OR of two selectors, one keeping the
// requirement (key present and value not listed) and one with `key DoesNotExist` instead. A
// selector with n NotIn requirements becomes up to 2^n selectors. Peers are ORed within a rule,
// so a peer becomes one peer per alternative; policies are unioned, so a policy whose
// podSelector has alternatives becomes one policy per alternative (same rules, same types).
// Both rewrites are exact, and checkExpansion verifies them against the Kubernetes library on
// every label set the model holds.

// expandSelector returns selectors whose union, evaluated with cyclonus' semantics, selects
// what sel selects with Kubernetes' semantics. nil stays nil (a nil peer selector has a meaning
// of its own).
func expandSelector(sel *metav1.LabelSelector) []*metav1.LabelSelector {
	if sel == nil {
		return []*metav1.LabelSelector{nil}
	}
	out := []*metav1.LabelSelector{{MatchLabels: sel.MatchLabels}}
	for _, req := range sel.MatchExpressions {
		var next []*metav1.LabelSelector
		for _, partial := range out {
			with := func(r metav1.LabelSelectorRequirement) *metav1.LabelSelector {
				s := partial.DeepCopy()
				s.MatchExpressions = append(s.MatchExpressions, r)
				return s
			}
			next = append(next, with(req))
			if req.Operator == metav1.LabelSelectorOpNotIn {
				next = append(next, with(metav1.LabelSelectorRequirement{Key: req.Key, Operator: metav1.LabelSelectorOpDoesNotExist}))
			}
		}
		out = next
	}
	return out
}

// hasNotIn says whether a selector has a NotIn requirement (only those need rewriting).
func hasNotIn(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	for _, r := range sel.MatchExpressions {
		if r.Operator == metav1.LabelSelectorOpNotIn {
			return true
		}
	}
	return false
}

// correctPolicies rewrites policies so that cyclonus' matcher gives Kubernetes' answers. The
// input is not modified.
func correctPolicies(policies []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range policies {
		c := p.DeepCopy()
		for i := range c.Spec.Ingress {
			c.Spec.Ingress[i].From = expandPeers(c.Spec.Ingress[i].From)
		}
		for i := range c.Spec.Egress {
			c.Spec.Egress[i].To = expandPeers(c.Spec.Egress[i].To)
		}
		// cyclonus' matcher panics on a policy without types; the API server defaults them,
		// and the oracle is fed what the API server stores.
		if len(c.Spec.PolicyTypes) == 0 {
			c.Spec.PolicyTypes = defaultPolicyTypes(c)
		}
		if !hasNotIn(&c.Spec.PodSelector) {
			out = append(out, c)
			continue
		}
		for i, alt := range expandSelector(&c.Spec.PodSelector) {
			a := c.DeepCopy()
			a.Name = fmt.Sprintf("%s~notin%d", c.Name, i)
			a.Spec.PodSelector = *alt
			out = append(out, a)
		}
	}
	return out
}

func defaultPolicyTypes(p *networkingv1.NetworkPolicy) []networkingv1.PolicyType {
	types := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if len(p.Spec.Egress) > 0 {
		types = append(types, networkingv1.PolicyTypeEgress)
	}
	return types
}

func expandPeers(peers []networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	if peers == nil {
		return nil // "any peer" must stay nil, not become an empty list
	}
	out := []networkingv1.NetworkPolicyPeer{}
	for _, peer := range peers {
		if !hasNotIn(peer.PodSelector) && !hasNotIn(peer.NamespaceSelector) {
			out = append(out, peer)
			continue
		}
		for _, ps := range expandSelector(peer.PodSelector) {
			for _, ns := range expandSelector(peer.NamespaceSelector) {
				out = append(out, networkingv1.NetworkPolicyPeer{PodSelector: ps, NamespaceSelector: ns, IPBlock: peer.IPBlock})
			}
		}
	}
	return out
}

// selectorDisagreement is one selector and one label set on which cyclonus and Kubernetes
// disagree.
type selectorDisagreement struct {
	Policy   string // namespace/name
	Selector string
	Labels   map[string]string
	Cyclonus bool
	Kube     bool
}

// policySelectors lists every label selector of the policies (target and peers).
func policySelectors(policies []*networkingv1.NetworkPolicy) map[string][]*metav1.LabelSelector {
	out := map[string][]*metav1.LabelSelector{}
	for _, p := range policies {
		key := p.Namespace + "/" + p.Name
		out[key] = append(out[key], &p.Spec.PodSelector)
		var peers []networkingv1.NetworkPolicyPeer
		for _, r := range p.Spec.Ingress {
			peers = append(peers, r.From...)
		}
		for _, r := range p.Spec.Egress {
			peers = append(peers, r.To...)
		}
		for _, peer := range peers {
			for _, s := range []*metav1.LabelSelector{peer.PodSelector, peer.NamespaceSelector} {
				if s != nil {
					out[key] = append(out[key], s)
				}
			}
		}
	}
	return out
}

// checkSelectors evaluates every selector of the policies on every label set with both
// cyclonus and k8s.io/apimachinery. It returns the disagreements, and an error if the
// expansion does not restore Kubernetes' answer (the correction itself would be wrong).
func checkSelectors(policies []*networkingv1.NetworkPolicy, labelSets []map[string]string) ([]selectorDisagreement, error) {
	var out []selectorDisagreement
	for policy, sels := range policySelectors(policies) {
		for _, sel := range sels {
			ks, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				return nil, fmt.Errorf("policy %s: selector %v: %w", policy, sel, err)
			}
			for _, ls := range labelSets {
				want := ks.Matches(labels.Set(ls))
				got := kube.IsLabelsMatchLabelSelector(ls, *sel)
				if got != want {
					out = append(out, selectorDisagreement{Policy: policy, Selector: ks.String(), Labels: ls, Cyclonus: got, Kube: want})
				}
				fixed := false
				for _, alt := range expandSelector(sel) {
					fixed = fixed || kube.IsLabelsMatchLabelSelector(ls, *alt)
				}
				if fixed != want {
					return nil, fmt.Errorf("policy %s: NotIn expansion of %q gives %v on %v, Kubernetes %v", policy, ks.String(), fixed, ls, want)
				}
			}
		}
	}
	return out, nil
}
