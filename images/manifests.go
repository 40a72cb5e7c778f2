// Package images holds the Kubernetes manifests of a deployment (manifests/*.yaml, applied in
// file name order) so that the tests and the test cluster apply exactly the files operators
// apply.
package images

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// Namespace is where every namespaced object of the manifests lives.
const Namespace = "ovn-transparent"

// ServiceAccounts of the components, in Namespace.
const (
	MasterServiceAccount = "ovnt-master"
	NodeServiceAccount   = "ovnt-node"
	// RemoteControllersServiceAccount runs `ovnt-node remote-controllers`.
	RemoteControllersServiceAccount = "ovnt-remote-controllers"
)

// Manifests returns the names of the manifest files, in the order they are applied.
func Manifests() []string {
	names, _ := fs.Glob(manifests, "manifests/*.yaml") // the pattern is valid
	sort.Strings(names)
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, "manifests/")
	}
	return names
}

// Objects parses the named manifest files (all of them when none are named) into their
// objects, in order.
func Objects(names ...string) ([]*unstructured.Unstructured, error) {
	if len(names) == 0 {
		names = Manifests()
	}
	var objs []*unstructured.Unstructured
	for _, name := range names {
		f, err := manifests.Open("manifests/" + name)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(raw) == 0 || string(raw) == "null" { // an empty document, e.g. after a trailing ---
				continue
			}
			// Unstructured's own decoding keeps integers as int64, as the API machinery expects.
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if u.GetKind() == "" || u.GetName() == "" {
				f.Close()
				return nil, fmt.Errorf("%s: an object without kind or name", name)
			}
			objs = append(objs, u)
		}
		f.Close()
	}
	return objs, nil
}

// RBACObjects returns what the components need to authenticate and be authorized: the
// Namespace, ServiceAccounts, Roles, ClusterRoles and their bindings, and the admission
// policy that narrows what a node agent may write.
func RBACObjects() ([]*unstructured.Unstructured, error) {
	all, err := Objects()
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, o := range all {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			objs = append(objs, o)
		}
	}
	return objs, nil
}
