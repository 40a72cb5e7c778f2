package netpol

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A policy whose destinations cannot be read has unknown rows, not "no pods": Translate
// returns a *ReadError and nothing to apply, for peers and for rules without peers alike.
func TestTranslateReadError(t *testing.T) {
	broken := errors.New("cache not readable")
	named := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &intstr.IntOrString{Type: intstr.String, StrVal: "http"}}}
	withPeer := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "peer"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: named,
				To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}}}
	anyDest := withPeer.DeepCopy()
	anyDest.Name, anyDest.Spec.Egress[0].To = "any", nil
	pods := []Pod{pod("a", "10.244.1.3", nil, corev1.ContainerPort{Name: "http", ContainerPort: 80})}

	for _, pol := range []*networkingv1.NetworkPolicy{withPeer, anyDest} {
		out, err := Translate(context.Background(), Input{Policy: pol, Pods: pods,
			PeerPods: func(Peer) ([]Pod, error) { return nil, broken },
			AllPods:  func() ([]Pod, error) { return nil, broken },
		})
		if _, ok := errors.AsType[*ReadError](err); !ok || !errors.Is(err, broken) {
			t.Errorf("%s: error %v, want a ReadError wrapping the read failure", pol.Name, err)
		}
		if len(out.Rows) != 0 || len(out.Peers) != 0 {
			t.Errorf("%s: %d rows and peers %v to apply after a read failure", pol.Name, len(out.Rows), out.Peers)
		}

		// The same policy with readable pods translates.
		out, err = Translate(context.Background(), Input{Policy: pol, Pods: pods,
			PeerPods: func(Peer) ([]Pod, error) { return pods, nil },
			AllPods:  func() ([]Pod, error) { return pods, nil },
		})
		if err != nil || len(acls(t, out)) < 2 {
			t.Errorf("%s: %v, acls %v", pol.Name, err, acls(t, out))
		}
	}
}
