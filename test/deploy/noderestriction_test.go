//go:build linux

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestNodeRestrictionPolicy (security audit H4) applies the manifests' RBAC and admission
// policy to a real API server and patches Nodes as node agents would, with ServiceAccount
// tokens bound to a Node, to a Pod on a node, and to nothing: a node agent may change its
// own Node's chassis annotation and nothing else, the master is not restricted.
func TestNodeRestrictionPolicy(t *testing.T) {
	ctx := t.Context()
	r := harness.NewTestRun(t)
	kube := apiServerWithRBAC(ctx, t, r)
	admin := kube.Client()
	nodes := map[string]*corev1.Node{}
	for _, name := range []string{"node-a", "node-b"} {
		n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{contract.NodeSubnetKey: "10.244.1.0/24"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = n
	}
	// The DaemonSet's pod on node-a: its projected token is bound to it.
	no := false
	pod, err := admin.CoreV1().Pods(images.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ovnt-node-a"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: images.NodeServiceAccount, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "ovnt-node", Image: "ovnt-node"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(ref *authenticationv1.BoundObjectReference) kubernetes.Interface {
		tr, err := admin.CoreV1().ServiceAccounts(images.Namespace).CreateToken(ctx, images.NodeServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(kube.RESTConfig())
		cfg.BearerToken = tr.Status.Token
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	nodeA := token(&authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-a", UID: nodes["node-a"].UID})
	podA := token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	unbound := token(nil)

	patch := func(c kubernetes.Interface, node string, annotations, labels map[string]string) error {
		meta := map[string]any{}
		if annotations != nil {
			meta["annotations"] = annotations
		}
		if labels != nil {
			meta["labels"] = labels
		}
		body, _ := json.Marshal(map[string]any{"metadata": meta})
		_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	chassis := func(id string) map[string]string {
		return map[string]string{contract.NodeChassisKey: fmt.Sprintf(`{"chassisID":%q}`, id)}
	}
	// The policy takes effect a moment after it is created.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := poll.Until(pctx, "the node restriction policy in force", 200*time.Millisecond, func() (bool, error) {
		return patch(nodeA, "node-b", chassis("probe"), nil) != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what    string
		client  kubernetes.Interface
		node    string
		ann     map[string]string
		labels  map[string]string
		allowed bool
	}{
		{"node-a's agent (Node-bound token): its own chassis annotation", nodeA, "node-a", chassis("a"), nil, true},
		{"node-a's agent (Pod-bound token): its own chassis annotation", podA, "node-a", chassis("a2"), nil, true},
		{"node-a's agent: node-b's chassis annotation", nodeA, "node-b", chassis("a"), nil, false},
		{"node-a's agent (Pod-bound token): node-b's chassis annotation", podA, "node-b", chassis("a"), nil, false},
		{"node-a's agent: its own subnet annotation", nodeA, "node-a", map[string]string{contract.NodeSubnetKey: "10.244.2.0/24"}, nil, false},
		{"node-a's agent: another annotation", nodeA, "node-a", map[string]string{"example.com/x": "y"}, nil, false},
		{"node-a's agent: a label", nodeA, "node-a", nil, map[string]string{"example.com/x": "y"}, false},
		{"an agent token bound to no node: a chassis annotation", unbound, "node-a", chassis("u"), nil, false},
		{"the cluster admin: node-b's subnet annotation", admin, "node-b", map[string]string{contract.NodeSubnetKey: "10.244.3.0/24"}, nil, true},
	} {
		err := patch(c.client, c.node, c.ann, c.labels)
		if (err == nil) != c.allowed {
			t.Errorf("%s: error %v, want allowed=%v", c.what, err, c.allowed)
		}
	}
	if _, err := unbound.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the node agent's informer (list nodes) is refused: %v", err)
	}
}
