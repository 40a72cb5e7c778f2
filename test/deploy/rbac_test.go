//go:build linux

package deploy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// expectedGrants is every permission the manifests may grant, one line per role, API group,
// resource, verb and (when limited) resource name, each with the code that needs it. A
// grant in the manifests that is not here fails TestRBACGrants, and so does a line here the
// manifests lack: changing what a component may do means changing this list too.
var expectedGrants = map[string]string{
	// ovnt-master (master/controller, master/run.go).
	"ClusterRole/ovnt-master /nodes list":                             "node informer",
	"ClusterRole/ovnt-master /nodes watch":                            "node informer",
	"ClusterRole/ovnt-master /nodes patch":                            "node subnet annotation",
	"ClusterRole/ovnt-master /pods list":                              "pod informer",
	"ClusterRole/ovnt-master /pods watch":                             "pod informer",
	"ClusterRole/ovnt-master /pods patch":                             "pod network annotation",
	"ClusterRole/ovnt-master /namespaces list":                        "namespace informer (NetworkPolicy namespace selectors)",
	"ClusterRole/ovnt-master /namespaces watch":                       "namespace informer",
	"ClusterRole/ovnt-master /services list":                          "Service informer (load balancers)",
	"ClusterRole/ovnt-master /services watch":                         "Service informer",
	"ClusterRole/ovnt-master discovery.k8s.io/endpointslices list":    "EndpointSlice informer (load balancer backends)",
	"ClusterRole/ovnt-master discovery.k8s.io/endpointslices watch":   "EndpointSlice informer",
	"ClusterRole/ovnt-master networking.k8s.io/networkpolicies list":  "NetworkPolicy informer (ACLs)",
	"ClusterRole/ovnt-master networking.k8s.io/networkpolicies watch": "NetworkPolicy informer",
	"ClusterRole/ovnt-master /events create":                          "Warning Events on bad input",
	"ClusterRole/ovnt-master /events patch":                           "the event recorder counts repeats with a patch",
	// Leader election on one Lease in the project's namespace.
	"Role/ovn-transparent/ovnt-master-leader-election coordination.k8s.io/leases create":             "first master creates the Lease (cannot be limited by name)",
	"Role/ovn-transparent/ovnt-master-leader-election coordination.k8s.io/leases get ovnt-master":    "candidates read the Lease",
	"Role/ovn-transparent/ovnt-master-leader-election coordination.k8s.io/leases update ovnt-master": "the leader renews, a candidate takes over",
	// ovnt-node remote-controllers (node/remotectl).
	"ClusterRole/ovnt-remote-controllers /nodes list":    "node informer (which nodes are remote, their addresses)",
	"ClusterRole/ovnt-remote-controllers /nodes watch":   "node informer",
	"ClusterRole/ovnt-remote-controllers /events create": "Warning Event on a remote Node without a controller",
	"ClusterRole/ovnt-remote-controllers /events patch":  "the event recorder counts repeats with a patch",
	// ovnt-node, Linux and Windows (node/internal/agent, node/internal/pods).
	"ClusterRole/ovnt-node /nodes list":                           "informer on its own Node",
	"ClusterRole/ovnt-node /nodes watch":                          "informer on its own Node",
	"ClusterRole/ovnt-node /nodes patch":                          "chassis annotation",
	"ClusterRole/ovnt-node /pods get":                             "CNI ADD checks a pod the cache lacks",
	"ClusterRole/ovnt-node /pods list":                            "informer on the node's pods",
	"ClusterRole/ovnt-node /pods watch":                           "informer on the node's pods",
	"ClusterRole/ovnt-node /services list":                        "NodePort flows, healthCheckNodePort",
	"ClusterRole/ovnt-node /services watch":                       "NodePort flows, healthCheckNodePort",
	"ClusterRole/ovnt-node discovery.k8s.io/endpointslices list":  "local endpoints for healthCheckNodePort",
	"ClusterRole/ovnt-node discovery.k8s.io/endpointslices watch": "local endpoints for healthCheckNodePort",
}

// expectedBindings is who holds which role.
var expectedBindings = []string{
	"ClusterRoleBinding/ovnt-master -> ClusterRole/ovnt-master: ServiceAccount ovn-transparent/ovnt-master",
	"ClusterRoleBinding/ovnt-node -> ClusterRole/ovnt-node: ServiceAccount ovn-transparent/ovnt-node",
	"ClusterRoleBinding/ovnt-remote-controllers -> ClusterRole/ovnt-remote-controllers: ServiceAccount ovn-transparent/ovnt-remote-controllers",
	"RoleBinding/ovn-transparent/ovnt-master-leader-election -> Role/ovnt-master-leader-election: ServiceAccount ovn-transparent/ovnt-master",
}

// manifestGrants lists what the roles in the manifests grant, one line per rule, group,
// resource, verb and resource name, and the bindings.
func manifestGrants(t *testing.T) (grants, bindings []string) {
	objs, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var role rbacv1.ClusterRole // same rules as a Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			if role.AggregationRule != nil {
				t.Errorf("%s %s aggregates other roles: what it grants is not in the manifests", o.GetKind(), o.GetName())
			}
			id := o.GetKind() + "/" + o.GetName()
			if o.GetNamespace() != "" {
				id = o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			}
			for _, r := range role.Rules {
				if len(r.NonResourceURLs) > 0 {
					t.Errorf("%s grants non-resource URLs %v", id, r.NonResourceURLs)
				}
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							for _, n := range names {
								grants = append(grants, strings.TrimSpace(fmt.Sprintf("%s %s/%s %s %s", id, g, res, v, n)))
							}
						}
					}
				}
			}
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding // same shape as a ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			id := o.GetKind() + "/" + o.GetName()
			if o.GetNamespace() != "" {
				id = o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			}
			for _, s := range b.Subjects {
				bindings = append(bindings, fmt.Sprintf("%s -> %s/%s: %s %s/%s", id, b.RoleRef.Kind, b.RoleRef.Name, s.Kind, s.Namespace, s.Name))
			}
		}
	}
	sort.Strings(grants)
	sort.Strings(bindings)
	return grants, bindings
}

// TestRBACGrants compares what the manifests grant with expectedGrants, both ways.
func TestRBACGrants(t *testing.T) {
	grants, bindings := manifestGrants(t)
	for _, g := range grants {
		if _, ok := expectedGrants[g]; !ok {
			t.Errorf("the manifests grant %q, which no code needs (add it to expectedGrants with the reason if it does)", g)
		}
		if strings.Contains(g, "*") {
			t.Errorf("wildcard grant %q", g)
		}
	}
	for g, why := range expectedGrants {
		if !slices.Contains(grants, g) {
			t.Errorf("the manifests lack %q (needed for: %s)", g, why)
		}
	}
	want := slices.Clone(expectedBindings)
	sort.Strings(want)
	if !slices.Equal(bindings, want) {
		t.Errorf("bindings:\n  got  %q\n  want %q", bindings, want)
	}
}

// TestRBACAuthorized asks the real API server, with the manifests applied, whether each
// component's ServiceAccount may do each verb on each resource the components touch or
// could be tempted to, and compares with expectedGrants: the roles bound to the accounts
// by the cluster's defaults must not add anything either.
func TestRBACAuthorized(t *testing.T) {
	ctx := t.Context()
	r := harness.NewTestRun(t)
	kube := apiServerWithRBAC(ctx, t, r)
	type res struct{ group, resource string }
	resources := []res{
		{"", "nodes"}, {"", "pods"}, {"", "namespaces"}, {"", "services"}, {"", "endpoints"},
		{"", "events"}, {"", "secrets"}, {"", "configmaps"}, {"", "serviceaccounts"},
		{"", "pods/status"}, {"", "nodes/status"}, {"", "services/status"},
		{"discovery.k8s.io", "endpointslices"}, {"networking.k8s.io", "networkpolicies"},
		{"coordination.k8s.io", "leases"}, {"events.k8s.io", "events"},
		{"rbac.authorization.k8s.io", "clusterroles"},
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	accounts := map[string]string{"ovnt-master": images.MasterServiceAccount, "ovnt-node": images.NodeServiceAccount,
		"ovnt-remote-controllers": images.RemoteControllersServiceAccount}
	for role, sa := range accounts {
		user := "system:serviceaccount:" + images.Namespace + ":" + sa
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + images.Namespace, "system:authenticated"}
		for _, ns := range []string{"default", images.Namespace, "kube-system"} {
			for _, rs := range resources {
				for _, v := range verbs {
					for _, name := range []string{"", "ovnt-master", "other"} {
						allowed := allowedBy(role, ns, rs.group, rs.resource, v, name)
						got := sar(ctx, t, kube.Client(), user, groups, ns, rs.group, rs.resource, v, name)
						if got != allowed {
							t.Errorf("%s: %s %s/%s in %s (name %q): authorized %v, expected %v", sa, v, rs.group, rs.resource, ns, name, got, allowed)
						}
					}
				}
			}
		}
	}
}

// allowedBy says whether expectedGrants lets role do verb on group/resource (named name, ""
// for any) in namespace ns.
func allowedBy(role, ns, group, resource, verb, name string) bool {
	for _, prefix := range []string{"ClusterRole/" + role + " ", "Role/" + images.Namespace + "/" + role + "-leader-election "} {
		if strings.HasPrefix(prefix, "Role/") && ns != images.Namespace {
			continue
		}
		line := prefix + group + "/" + resource + " " + verb
		if _, ok := expectedGrants[line]; ok {
			return true
		}
		if _, ok := expectedGrants[line+" "+name]; ok && name != "" {
			return true
		}
	}
	return false
}

func sar(ctx context.Context, t *testing.T, kube kubernetes.Interface, user string, groups []string, ns, group, resource, verb, name string) bool {
	t.Helper()
	sub, res := resource, ""
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		sub, res = resource[:i], resource[i+1:]
	}
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: sub, Subresource: res, Verb: verb, Name: name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return review.Status.Allowed
}

// apiServerWithRBAC starts an API server alone in run r and applies the manifests'
// ServiceAccounts, roles and bindings (images.RBACObjects) to it.
func apiServerWithRBAC(ctx context.Context, t *testing.T, r *harness.Run) *harness.Kube {
	t.Helper()
	kube, err := r.StartKube(ctx, harness.KubeOptions{APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := images.RBACObjects()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ApplyObjects(ctx, kube.RESTConfig(), objs, false); err != nil {
		t.Fatal(err)
	}
	return kube
}
