package conformance

import (
	"fmt"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestExpandSelectorMatchesKubernetes: for every operator mix on a few label sets, the union
// of the expansion under cyclonus' semantics is what k8s.io/apimachinery says.
func TestExpandSelectorMatchesKubernetes(t *testing.T) {
	sets := []map[string]string{{}, {"a": "1"}, {"a": "2"}, {"b": "1"}, {"a": "1", "b": "2"}, {"a": "3", "b": "1"}}
	reqs := []metav1.LabelSelectorRequirement{
		{Key: "a", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1"}},
		{Key: "b", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1", "2"}},
		{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"1", "3"}},
		{Key: "b", Operator: metav1.LabelSelectorOpExists},
		{Key: "b", Operator: metav1.LabelSelectorOpDoesNotExist},
	}
	var sels []*metav1.LabelSelector
	for i := range reqs {
		sels = append(sels, &metav1.LabelSelector{MatchExpressions: reqs[i : i+1]})
		for j := i + 1; j < len(reqs); j++ {
			sels = append(sels, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{reqs[i], reqs[j]}})
		}
	}
	sels = append(sels, &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}, MatchExpressions: reqs[1:2]})
	var policies []*networkingv1.NetworkPolicy
	for _, s := range sels {
		policies = append(policies, &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PodSelector: *s}})
	}
	dis, err := checkSelectors(policies, sets)
	if err != nil {
		t.Fatal(err)
	}
	if len(dis) == 0 {
		t.Fatal("no disagreement found: the test no longer exercises cyclonus' NotIn fault")
	}
	for _, d := range dis {
		if d.Kube != true || d.Cyclonus != false {
			t.Errorf("unexpected disagreement %+v (only NotIn on a missing key is known)", d)
		}
		if _, err := labels.Parse(d.Selector); err != nil {
			t.Errorf("selector %q: %v", d.Selector, err)
		}
	}
}

// TestCorrectionChangesExpectation: a peer `pod NotIn [b]` and a source pod without "pod":
// cyclonus alone says blocked, the corrected oracle says allowed, and the probe is counted.
func TestCorrectionChangesExpectation(t *testing.T) {
	res := testResources()
	res, err := res.SetPodLabels("x", "a", map[string]string{"app": "a"})
	if err != nil {
		t.Fatal(err)
	}
	tc := notInCases()[0]
	pol := tc.Steps[0].Actions[0].CreatePolicy.Policy
	e, err := expect([]*networkingv1.NetworkPolicy{pol}, res, generator.NewProbeConfig(intstr.FromInt32(80), corev1.ProtocolTCP, generator.ProbeModePodIP))
	if err != nil {
		t.Fatal(err)
	}
	k := probeKey{From: "x/a", To: "y/a", Proto: corev1.ProtocolTCP, Port: 80}
	if !e.Want[k] {
		t.Errorf("%s: want allowed (Kubernetes: a missing key matches NotIn)", k)
	}
	if _, ok := e.Corrected[k]; !ok {
		t.Errorf("%s: not counted as corrected; corrected: %v", k, e.Corrected)
	}
	if kb := (probeKey{From: "x/b", To: "y/a", Proto: corev1.ProtocolTCP, Port: 80}); e.Want[kb] {
		t.Errorf("%s: want blocked (pod=b is excluded)", kb)
	}
	if len(e.Disagreements) == 0 {
		t.Error("no selector disagreement reported")
	}
}

// TestCISubsetCoversEveryTag: the CI subset carries every tag the full set carries.
func TestCISubsetCoversEveryTag(t *testing.T) {
	cases := allCases("10.244.1.5")
	sub := ciSubset(cases)
	covered := map[string]bool{}
	for _, i := range sub {
		for tag := range cases[i].Tags {
			covered[tag] = true
		}
	}
	all := map[string]int{}
	for _, tc := range cases {
		for tag := range tc.Tags {
			all[tag]++
			if !covered[tag] {
				t.Errorf("tag %s is not in the CI subset", tag)
			}
		}
	}
	var never []string
	for _, tag := range generator.TagSlice {
		if all[tag] == 0 {
			never = append(never, tag)
		}
	}
	t.Logf("%d cases, CI subset %d cases %v; tags no case carries: %v", len(cases), len(sub), sub, never)
}

func testResources() *probe.Resources {
	r := &probe.Resources{Namespaces: map[string]map[string]string{}}
	for i, ns := range namespaces {
		r.Namespaces[ns] = map[string]string{"ns": ns, "kubernetes.io/metadata.name": ns}
		for j, name := range podNames {
			p := probe.NewDefaultPod(ns, name, ports, protocols, false, "")
			p.IP = fmt.Sprintf("10.244.0.%d", 10+i*3+j)
			r.Pods = append(r.Pods, p)
		}
	}
	return r
}
