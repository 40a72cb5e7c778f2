package conformance

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// probeKey names one probe: from a pod to a pod on one port and protocol. Pods are
// "<namespace>/<name>".
type probeKey struct {
	From, To string
	Proto    corev1.Protocol
	Port     int
}

func (k probeKey) String() string {
	return fmt.Sprintf("%s -> %s %s/%d", k.From, k.To, k.Proto, k.Port)
}

// expectation is what the oracle says about one step: the probes to make and their expected
// outcome (true: the connection is allowed).
type expectation struct {
	Jobs map[probeKey]*probe.Job
	Want map[probeKey]bool
	// Corrected are the probes whose answer the NotIn correction changed (value: Kubernetes'
	// answer, the one in Want).
	Corrected map[probeKey]bool
	// Disagreements are the selector evaluations where cyclonus and Kubernetes differ.
	Disagreements []selectorDisagreement
}

// expect asks cyclonus which of the step's probes are allowed under policies, with resources
// as the cluster's state (labels, pods). A pod's traffic to itself is left out, as the
// upstream e2e suite does.
func expect(policies []*networkingv1.NetworkPolicy, res *probe.Resources, pc *generator.ProbeConfig) (*expectation, error) {
	builder := &probe.JobBuilder{TimeoutSeconds: 1}
	jobs := builder.GetJobsForProbeConfig(res, pc)
	original := matcher.BuildNetworkPolicies(true, withDefaultTypes(policies))
	corrected := matcher.BuildNetworkPolicies(true, correctPolicies(policies))
	var labelSets []map[string]string
	for _, p := range res.Pods {
		labelSets = append(labelSets, p.Labels)
	}
	for _, l := range res.Namespaces {
		labelSets = append(labelSets, l)
	}
	dis, err := checkSelectors(policies, labelSets)
	if err != nil {
		return nil, err
	}
	e := &expectation{Jobs: map[probeKey]*probe.Job{}, Want: map[probeKey]bool{}, Corrected: map[probeKey]bool{}, Disagreements: dis}
	for _, j := range jobs.Valid {
		if j.FromKey == j.ToKey {
			continue
		}
		k := probeKey{From: j.FromKey, To: j.ToKey, Proto: j.Protocol, Port: j.ResolvedPort}
		if _, dup := e.Jobs[k]; dup {
			return nil, fmt.Errorf("oracle: probe %s listed twice", k)
		}
		e.Jobs[k] = j
		want := corrected.IsTrafficAllowed(j.Traffic()).IsAllowed()
		e.Want[k] = want
		if original.IsTrafficAllowed(j.Traffic()).IsAllowed() != want {
			e.Corrected[k] = want
		}
	}
	return e, nil
}

// withDefaultTypes fills in policyTypes as the API server does (cyclonus' matcher panics
// without them).
func withDefaultTypes(policies []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	out := make([]*networkingv1.NetworkPolicy, 0, len(policies))
	for _, p := range policies {
		if len(p.Spec.PolicyTypes) == 0 {
			p = p.DeepCopy()
			p.Spec.PolicyTypes = defaultPolicyTypes(p)
		}
		out = append(out, p)
	}
	return out
}

// renderDiff prints, for each port and protocol with a mismatch, the truth table of expected
// and observed connectivity: "." allowed, "X" blocked, and a mismatching cell as
// "<expected><observed>" in brackets, e.g. "[X.]" (expected blocked, was allowed).
func renderDiff(want, got map[probeKey]bool) string {
	type pp struct {
		proto corev1.Protocol
		port  int
	}
	bad := map[pp]bool{}
	pods := map[string]bool{}
	for k, w := range want {
		pods[k.From], pods[k.To] = true, true
		if g, ok := got[k]; ok && g != w {
			bad[pp{k.Proto, k.Port}] = true
		}
	}
	names := sortedKeys(pods)
	var pps []pp
	for p := range bad {
		pps = append(pps, p)
	}
	sort.Slice(pps, func(i, j int) bool {
		if pps[i].proto != pps[j].proto {
			return pps[i].proto < pps[j].proto
		}
		return pps[i].port < pps[j].port
	})
	mark := func(b bool) string {
		if b {
			return "."
		}
		return "X"
	}
	var sb strings.Builder
	for _, p := range pps {
		fmt.Fprintf(&sb, "%s/%d (rows: from, columns: to; [expected observed] where they differ)\n", p.proto, p.port)
		fmt.Fprintf(&sb, "%-8s", "")
		for _, to := range names {
			fmt.Fprintf(&sb, " %-6s", to)
		}
		sb.WriteString("\n")
		for _, from := range names {
			fmt.Fprintf(&sb, "%-8s", from)
			for _, to := range names {
				k := probeKey{From: from, To: to, Proto: p.proto, Port: p.port}
				w, ok := want[k]
				g, gok := got[k]
				cell := "-"
				switch {
				case !ok:
				case !gok:
					cell = mark(w) + "?"
				case w == g:
					cell = mark(w)
				default:
					cell = "[" + mark(w) + mark(g) + "]"
				}
				fmt.Fprintf(&sb, " %-6s", cell)
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// policiesYAML prints policies as an operator would write them.
func policiesYAML(policies []*networkingv1.NetworkPolicy) string {
	var sb strings.Builder
	for _, p := range policies {
		c := p.DeepCopy()
		c.ManagedFields, c.ResourceVersion, c.UID, c.CreationTimestamp, c.Generation = nil, "", "", metav1.Time{}, 0
		b, err := yaml.Marshal(c)
		if err != nil {
			fmt.Fprintf(&sb, "# %s/%s: %v\n", p.Namespace, p.Name, err)
			continue
		}
		sb.WriteString("---\n")
		sb.Write(b)
	}
	return sb.String()
}

// renderResources prints the model one pod a line: address, pod labels, namespace labels.
func renderResources(res *probe.Resources) string {
	var sb strings.Builder
	for _, p := range res.Pods {
		fmt.Fprintf(&sb, "%-8s %-15s pod labels %v, namespace labels %v\n", p.Namespace+"/"+p.Name, p.IP, p.Labels, res.Namespaces[p.Namespace])
	}
	return sb.String()
}
