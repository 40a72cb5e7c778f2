//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// The daemons of the cluster run as the ServiceAccounts of images/manifests, with the roles
// those files grant and nothing else: a permission the code needs and the manifests lack
// fails the end-to-end tests, as it would fail a real deployment.

// saTokenLifetime covers a test binary and a long sandbox session; the API server of the
// harness sets no maximum.
const saTokenLifetime = 7 * 24 * time.Hour

// serviceAccounts holds the tokens minted for the daemons at Start.
type serviceAccounts struct {
	masterToken      string
	masterKubeconfig string // for the root network namespace
}

// setUpServiceAccounts applies the manifests' Namespace, ServiceAccounts, roles, bindings and
// admission policy, mints the master's token with the TokenRequest API, and writes the
// master's kubeconfig (each node agent's token is minted when it starts: agentKubeconfig).
func (c *Cluster) setUpServiceAccounts(ctx context.Context) error {
	objs, err := images.RBACObjects()
	if err != nil {
		return fmt.Errorf("rbac manifests: %w", err)
	}
	if err := ApplyObjects(ctx, c.Kube.RESTConfig(), objs, false); err != nil {
		return fmt.Errorf("rbac manifests: %w", err)
	}
	if c.sa.masterToken, err = ServiceAccountToken(ctx, c.Kube.RESTConfig(), images.MasterServiceAccount); err != nil {
		return err
	}
	c.sa.masterKubeconfig = c.Run.Path("kube", "kubeconfig-"+images.MasterServiceAccount)
	return withToken(c.Kube.Kubeconfig, c.sa.masterKubeconfig, c.sa.masterToken)
}

// ServiceAccountKubeconfig mints a token for the ServiceAccount name of images.Namespace
// (which must exist) and writes to dst the admin kubeconfig of k with that token instead.
func ServiceAccountKubeconfig(ctx context.Context, k *harness.Kube, name, dst string) error {
	token, err := ServiceAccountToken(ctx, k.RESTConfig(), name)
	if err != nil {
		return err
	}
	return withToken(k.Kubeconfig, dst, token)
}

// agentKubeconfig returns a kubeconfig for n's agent: the admin kubeconfig that reaches the
// API server from inside the node's namespace, with a token of the node ServiceAccount bound
// to n's Node instead. The manifests' admission policy (15-node-restriction.yaml) lets an
// agent write only the Node its token names, as a DaemonSet pod's token does. The Node is
// created first when the kubelet has not registered it yet (as an operator pre-provisions
// a node; the kubelet adopts it).
func (n *Node) agentKubeconfig(ctx context.Context) (string, error) {
	kube, err := kubernetes.NewForConfig(n.c.Kube.RESTConfig())
	if err != nil {
		return "", err
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, metav1.CreateOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("node %s for its agent's token: %w", n.Name, err)
	}
	secs := int64(saTokenLifetime / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(images.Namespace).CreateToken(ctx, images.NodeServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s bound to node %s: %w", images.Namespace, images.NodeServiceAccount, n.Name, err)
	}
	dst := filepath.Join(n.Dir, "kubeconfig-"+images.NodeServiceAccount)
	return dst, withToken(n.Kubeconfig, dst, tr.Status.Token)
}

// remoteManagerKubeconfig returns a kubeconfig for `ovnt-node remote-controllers` in netns:
// the admin one that reaches the API server from there, with a token of the manifests'
// ovnt-remote-controllers ServiceAccount instead.
func (c *Cluster) remoteManagerKubeconfig(ctx context.Context, netns string) (string, error) {
	src, err := c.Kube.ExposeInNetns(netns)
	if err != nil {
		return "", err
	}
	token, err := ServiceAccountToken(ctx, c.Kube.RESTConfig(), images.RemoteControllersServiceAccount)
	if err != nil {
		return "", err
	}
	dst := c.Run.Path("kube", "kubeconfig-"+images.RemoteControllersServiceAccount+"-"+netns)
	return dst, withToken(src, dst, token)
}

// withToken writes to dst the kubeconfig src with every user's credentials replaced by token.
func withToken(src, dst, token string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Token, ai.TokenFile = token, ""
		ai.ClientCertificate, ai.ClientCertificateData, ai.ClientKey, ai.ClientKeyData = "", nil, "", nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, dst)
}

// ServiceAccountToken mints a token for the ServiceAccount name of images.Namespace.
func ServiceAccountToken(ctx context.Context, cfg *rest.Config, name string) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	secs := int64(saTokenLifetime / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(images.Namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s: %w", images.Namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ApplyObjects server-side applies objs in order, as `kubectl apply --server-side` would,
// or only validates them through every admission step when dryRun is set (the API server's
// dry run: nothing is stored).
func ApplyObjects(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, dryRun bool) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: "ovnt-deploy", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, opts); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
