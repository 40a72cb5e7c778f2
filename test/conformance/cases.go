package conformance

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mattfenwick/cyclonus/pkg/generator"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster model cyclonus' generator is written for: namespaces x, y, z labelled ns=<name>,
// pods a, b, c labelled pod=<name> in each, every pod serving ports 80 and 81 over TCP, UDP and
// SCTP, one container per port and protocol, named serve-<port>-<protocol>.
var (
	namespaces = []string{"x", "y", "z"}
	podNames   = []string{"a", "b", "c"}
	ports      = []int{80, 81}
	protocols  = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
)

// allCases is every case cyclonus generates (podIP is z/c's address, which its ipBlock cases
// are built around) followed by ours.
func allCases(podIP string) []*generator.TestCase {
	g := generator.NewTestCaseGenerator(false, podIP, namespaces, nil, nil)
	return append(g.GenerateAllTestCases(), notInCases()...)
}

// notInCases exercise the oracle's known fault: selectors with NotIn on a key some pods or
// namespaces lack. None of cyclonus' own cases reach it with the default labels (every pod has
// "pod", every namespace "ns").
func notInCases() []*generator.TestCase {
	notIn := func(key string, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: values}}}
	}
	policy := func(ns, name string, target metav1.LabelSelector, from []networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
		rules := []networkingv1.NetworkPolicyIngressRule{}
		if from != nil {
			rules = append(rules, networkingv1.NetworkPolicyIngressRule{From: from})
		}
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: target,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     rules,
			},
		}
	}
	return []*generator.TestCase{
		generator.NewTestCase("ovnt: peer pods NotIn, a source pod lacks the key",
			generator.NewStringSet(generator.TagIngress, generator.TagPodsByLabel, generator.TagAllNamespaces, generator.TagSetPodLabels, generator.TagCreatePolicy),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.CreatePolicy(policy("y", "from-pod-notin-b", metav1.LabelSelector{},
					[]networkingv1.NetworkPolicyPeer{{PodSelector: notIn("pod", "b"), NamespaceSelector: &metav1.LabelSelector{}}}))),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.SetPodLabels("x", "a", map[string]string{"app": "a"}))),
		generator.NewTestCase("ovnt: peer namespaces NotIn, a source namespace lacks the key",
			generator.NewStringSet(generator.TagIngress, generator.TagNamespacesByLabel, generator.TagSetNamespaceLabels, generator.TagCreatePolicy),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.CreatePolicy(policy("x", "from-ns-notin-y", metav1.LabelSelector{},
					[]networkingv1.NetworkPolicyPeer{{NamespaceSelector: notIn("ns", "y")}}))),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.SetNamespaceLabels("z", map[string]string{"team": "z"}))),
		generator.NewTestCase("ovnt: target pods NotIn, a target pod lacks the key",
			generator.NewStringSet(generator.TagIngress, generator.TagTargetPodSelector, generator.TagDenyAll, generator.TagSetPodLabels, generator.TagCreatePolicy),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.CreatePolicy(policy("x", "deny-pod-notin-a", *notIn("pod", "a"), nil))),
			generator.NewTestStep(generator.ProbeAllAvailable,
				generator.SetPodLabels("x", "b", map[string]string{"app": "b"}))),
	}
}

// hasNotInPolicy says whether a case creates or updates a policy with a NotIn selector.
func hasNotInPolicy(tc *generator.TestCase) bool {
	for _, s := range tc.Steps {
		for _, a := range s.Actions {
			var p *networkingv1.NetworkPolicy
			if a.CreatePolicy != nil {
				p = a.CreatePolicy.Policy
			} else if a.UpdatePolicy != nil {
				p = a.UpdatePolicy.Policy
			}
			if p == nil {
				continue
			}
			for _, sels := range policySelectors([]*networkingv1.NetworkPolicy{p}) {
				for _, sel := range sels {
					if hasNotIn(sel) {
						return true
					}
				}
			}
		}
	}
	return false
}

// ciSubset picks a few cases in which every tag of cases appears at least once (greedy set
// cover: the case adding most uncovered tags per step first, ties to the earlier one), plus
// our cases with NotIn selectors. It returns the indexes in cases, sorted.
func ciSubset(cases []*generator.TestCase) []int {
	uncovered := map[string]bool{}
	for _, tc := range cases {
		for t := range tc.Tags {
			uncovered[t] = true
		}
	}
	chosen := map[int]bool{}
	for i, tc := range cases {
		if hasNotInPolicy(tc) && strings.HasPrefix(tc.Description, "ovnt:") {
			chosen[i] = true
			for t := range tc.Tags {
				delete(uncovered, t)
			}
		}
	}
	for len(uncovered) > 0 {
		best, bestN := -1, 0
		for i, tc := range cases {
			n := 0
			for t := range tc.Tags {
				if uncovered[t] {
					n++
				}
			}
			// Each step is a full round of probes: weigh new tags by steps.
			if n > 0 && (best < 0 || n*len(cases[best].Steps) > bestN*len(tc.Steps)) {
				best, bestN = i, n
			}
		}
		chosen[best] = true
		for t := range cases[best].Tags {
			delete(uncovered, t)
		}
	}
	var out []int
	for i := range chosen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// tagCount is the outcome of the cases carrying one tag.
type tagCount struct{ Pass, Fail int }

// caseResult is the outcome of one case.
type caseResult struct {
	Index       int
	Description string
	Tags        []string
	Passed      bool
	Err         error
	Probes      int // probes compared
	Mismatches  int
	Corrected   int // probes whose expectation the NotIn correction changed
	Retried     int // probes that differed on the first try and agreed on the second
	// StaleDatapath counts the probes that differed only because ovs-vswitchd's datapath
	// flow cache lagged its OpenFlow tables (runner.afterRecompute): not failures, and
	// Notes holds their full dumps.
	StaleDatapath int
	Notes         []string
	Seconds       float64
}

// summary prints pass/fail counts per tag, the totals and the NotIn corrections.
func summary(results []caseResult) string {
	counts := map[string]*tagCount{}
	for _, t := range generator.TagSlice {
		counts[t] = &tagCount{}
	}
	pass, corrProbes, corrCases, probes, retried, staleProbes, staleCases := 0, 0, 0, 0, 0, 0, 0
	var secs float64
	for _, r := range results {
		for _, t := range r.Tags {
			if counts[t] == nil {
				counts[t] = &tagCount{}
			}
			if r.Passed {
				counts[t].Pass++
			} else {
				counts[t].Fail++
			}
		}
		if r.Passed {
			pass++
		}
		if r.Corrected > 0 {
			corrCases++
			corrProbes += r.Corrected
		}
		probes += r.Probes
		retried += r.Retried
		if r.StaleDatapath > 0 {
			staleCases++
			staleProbes += r.StaleDatapath
		}
		secs += r.Seconds
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-28s %5s %5s\n", "tag", "pass", "fail")
	for _, t := range sortedKeys(counts) {
		c := counts[t]
		fmt.Fprintf(&sb, "%-28s %5d %5d\n", t, c.Pass, c.Fail)
	}
	fmt.Fprintf(&sb, "cases: %d passed, %d failed, %d total; %d probes compared, %d agreed only on the second try\n", pass, len(results)-pass, len(results), probes, retried)
	fmt.Fprintf(&sb, "NotIn corrections of the oracle: %d probes in %d cases\n", corrProbes, corrCases)
	fmt.Fprintf(&sb, "stale datapath flows of ovs-vswitchd (right only once its flow cache was flushed; not failures): %d probes in %d cases\n", staleProbes, staleCases)
	if len(results) > 0 {
		fmt.Fprintf(&sb, "time per case: %.1f s mean, %.0f s total\n", secs/float64(len(results)), secs)
	}
	for _, r := range results {
		if !r.Passed {
			fmt.Fprintf(&sb, "FAILED case #%d %q (%d/%d probes differ, err %v)\n", r.Index, r.Description, r.Mismatches, r.Probes, r.Err)
		}
	}
	return sb.String()
}
