//go:build linux

// Package deploy tests the deployment files: the Kubernetes manifests (images/manifests)
// against a real API server, what their roles grant, and the image Dockerfiles against what
// `make build` produces. The Ansible playbooks are checked by ansible/ci.sh (make
// lint-deploy).
package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestManifestsDryRun applies every manifest with a server-side dry run: the API server
// decodes, defaults, validates and admits each object as it would for real. The Namespace
// and RBAC objects are applied for real first, since objects in a namespace that does not
// exist are refused. A broken copy of the Windows DaemonSet must be refused too, which
// shows the dry run validates what matters there.
func TestManifestsDryRun(t *testing.T) {
	ctx := t.Context()
	r := harness.NewTestRun(t)
	kube := apiServerWithRBAC(ctx, t, r)
	all, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range all {
		if err := cluster.ApplyObjects(ctx, kube.RESTConfig(), []*unstructured.Unstructured{o}, true); err != nil {
			t.Errorf("dry run: %v", err)
		}
		kinds[o.GetKind()]++
	}
	for kind, n := range map[string]int{"Namespace": 1, "ServiceAccount": 3, "ClusterRole": 3, "Role": 1,
		"ConfigMap": 1, "Deployment": 2, "DaemonSet": 2} {
		if kinds[kind] != n {
			t.Errorf("%d %s objects in the manifests, want %d", kinds[kind], kind, n)
		}
	}

	// A HostProcess pod must use the host network: the API server refuses it otherwise.
	win := findObject(t, all, "DaemonSet", "ovnt-node-windows")
	if err := unstructured.SetNestedField(win.Object, false, "spec", "template", "spec", "hostNetwork"); err != nil {
		t.Fatal(err)
	}
	err = cluster.ApplyObjects(ctx, kube.RESTConfig(), []*unstructured.Unstructured{win}, true)
	if err == nil || !strings.Contains(err.Error(), "hostNetwork") {
		t.Errorf("dry run of a HostProcess DaemonSet without the host network: got %v, want a hostNetwork error", err)
	}
}

// TestManifestsWorkloads checks what the API server cannot: each workload runs as its own
// ServiceAccount, on its OS, and the master with leader election on the Lease its Role
// grants.
func TestManifestsWorkloads(t *testing.T) {
	all, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kind, name, sa, os string }{
		{"Deployment", "ovnt-master", images.MasterServiceAccount, "linux"},
		{"DaemonSet", "ovnt-node-linux", images.NodeServiceAccount, "linux"},
		{"DaemonSet", "ovnt-node-windows", images.NodeServiceAccount, "windows"},
		{"Deployment", "ovnt-remote-controllers", images.RemoteControllersServiceAccount, "linux"},
	} {
		o := findObject(t, all, c.kind, c.name)
		if o.GetNamespace() != images.Namespace {
			t.Errorf("%s %s in namespace %q, want %q", c.kind, c.name, o.GetNamespace(), images.Namespace)
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		if sa != c.sa {
			t.Errorf("%s %s runs as %q, want %q", c.kind, c.name, sa, c.sa)
		}
		os, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "nodeSelector", "kubernetes.io/os")
		if os != c.os {
			t.Errorf("%s %s: nodeSelector kubernetes.io/os=%q, want %q", c.kind, c.name, os, c.os)
		}
		hostNet, _, _ := unstructured.NestedBool(o.Object, "spec", "template", "spec", "hostNetwork")
		if !hostNet {
			t.Errorf("%s %s is not on the host network: it would need the pod network it sets up", c.kind, c.name)
		}
	}
	win := findObject(t, all, "DaemonSet", "ovnt-node-windows")
	if hp, _, _ := unstructured.NestedBool(win.Object, "spec", "template", "spec", "securityContext", "windowsOptions", "hostProcess"); !hp {
		t.Error("the Windows DaemonSet is not a HostProcess pod")
	}

	master := findObject(t, all, "Deployment", "ovnt-master")
	env := containerEnv(t, master, "ovnt-master")
	if env["OVNT_LEADER_ELECT"] != "true" {
		t.Errorf("master OVNT_LEADER_ELECT=%q, want true (the Deployment has several replicas)", env["OVNT_LEADER_ELECT"])
	}
	if env["OVNT_LEADER_ELECT_NAMESPACE"] != images.Namespace || env["OVNT_LEADER_ELECT_NAME"] != "ovnt-master" {
		t.Errorf("master Lease %s/%s, but its Role grants %s/ovnt-master", env["OVNT_LEADER_ELECT_NAMESPACE"], env["OVNT_LEADER_ELECT_NAME"], images.Namespace)
	}
	if n, _, _ := unstructured.NestedInt64(master.Object, "spec", "replicas"); n < 2 {
		t.Errorf("master replicas %d, want at least 2", n)
	}
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o.DeepCopy()
		}
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
	return nil
}

// container returns a workload's container of that name.
func container(t *testing.T, o *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if cm, _ := c.(map[string]any); cm["name"] == name {
			return cm
		}
	}
	t.Fatalf("%s %s has no container %s", o.GetKind(), o.GetName(), name)
	return nil
}

// containerEnv returns the literal environment values of a workload's container.
func containerEnv(t *testing.T, o *unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	env := map[string]string{}
	list, _ := container(t, o, name)["env"].([]any)
	for _, e := range list {
		em, _ := e.(map[string]any)
		key, _ := em["name"].(string)
		value, _ := em["value"].(string)
		env[key] = value
	}
	return env
}

// TestDockerfileCopies checks that every file the Dockerfiles COPY from the build context
// (the repository root) is either in the repository or built there by `make build` or
// `make build-windows`, as the Makefile says.
func TestDockerfileCopies(t *testing.T) {
	root := filepath.Join("..", "..")
	built := makeOutputs(t, filepath.Join(root, "Makefile"))
	dockerfiles, _ := filepath.Glob(filepath.Join(root, "images", "*", "Dockerfile"))
	if len(dockerfiles) < 2 {
		t.Fatalf("Dockerfiles: %v, want the Linux and the Windows one", dockerfiles)
	}
	for _, df := range dockerfiles {
		srcs := copySources(t, df)
		if len(srcs) == 0 {
			t.Errorf("%s copies nothing", df)
		}
		for _, src := range srcs {
			if strings.HasPrefix(src, "_output/") {
				if !slices.Contains(built, src) {
					t.Errorf("%s copies %s, which no make build target produces (they build %v)", df, src, built)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("%s copies %s: %v", df, src, err)
			}
		}
	}
}

// makeOutputs returns the files the Makefile's build and build-windows targets write
// (their -o arguments), with $(BIN) expanded.
func makeOutputs(t *testing.T, makefile string) []string {
	t.Helper()
	b, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	target := ""
	re := regexp.MustCompile(`-o (\S+)`)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "\t") {
			target, _, _ = strings.Cut(line, ":")
			continue
		}
		if target != "build" && target != "build-windows" {
			continue
		}
		if m := re.FindStringSubmatch(line); m != nil {
			outs = append(outs, strings.ReplaceAll(m[1], "$(BIN)", "_output/bin"))
		}
	}
	if len(outs) == 0 {
		t.Fatal("no outputs found in the Makefile's build targets")
	}
	return outs
}

// copySources returns the build-context sources of the Dockerfile's COPY and ADD
// instructions (not those copied from another stage).
func copySources(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var srcs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || (!strings.EqualFold(fields[0], "COPY") && !strings.EqualFold(fields[0], "ADD")) {
			continue
		}
		args := fields[1:]
		fromStage := false
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			fromStage = fromStage || strings.HasPrefix(args[0], "--from=")
			args = args[1:]
		}
		if fromStage || len(args) < 2 {
			continue
		}
		srcs = append(srcs, args[:len(args)-1]...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return srcs
}

// TestManifestsTLS (security audit C1): the OVN remotes in the ConfigMap are TLS, and every
// container that connects to them is given the files of a TLS identity, mounted into it: the
// master from the Secret ovnt-master-tls, the Linux nodes' ovnt-node and ovn-controller from
// the host (a DaemonSet cannot mount a Secret per node). The Windows node, a remote chassis,
// has no SB identity: its remote controller has it (flags_test.go, remoteChassisFlagErrors).
func TestManifestsTLS(t *testing.T) {
	all, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	config, _, _ := unstructured.NestedStringMap(findObject(t, all, "ConfigMap", "ovnt-config").Object, "data")
	for _, key := range []string{"nb-address", "sb-address"} {
		for _, r := range strings.Split(config[key], ",") {
			if !strings.HasPrefix(r, "ssl:") {
				t.Errorf("ConfigMap %s: remote %q is not ssl:", key, r)
			}
		}
	}
	for _, c := range []struct {
		kind, name, container, prefix, mount string
	}{
		{"Deployment", "ovnt-master", "ovnt-master", "OVNT_NB_", "/etc/ovn-transparent/pki"},
		{"DaemonSet", "ovnt-node-linux", "ovnt-node", "OVNT_SB_", "/etc/ovn-transparent/pki"},
		{"DaemonSet", "ovnt-node-linux", "ovn-controller", "OVNT_SB_", "/etc/ovn-transparent/pki"},
	} {
		o := findObject(t, all, c.kind, c.name)
		env := containerEnv(t, o, c.container)
		mounts := containerMounts(t, o, c.container)
		for _, v := range []string{"CLIENT_CERT", "CLIENT_KEY", "CA_CERT"} {
			path := env[c.prefix+v]
			if path == "" {
				t.Errorf("%s %s container %s: no %s%s", c.kind, c.name, c.container, c.prefix, v)
				continue
			}
			if !strings.HasPrefix(path, c.mount) {
				t.Errorf("%s %s container %s: %s%s=%s is not under %s", c.kind, c.name, c.container, c.prefix, v, path, c.mount)
			}
		}
		if _, ok := mounts[c.mount]; !ok {
			t.Errorf("%s %s container %s mounts nothing at %s (mounts %v)", c.kind, c.name, c.container, c.mount, mounts)
		}
	}
	master := findObject(t, all, "Deployment", "ovnt-master")
	vols, _, _ := unstructured.NestedSlice(master.Object, "spec", "template", "spec", "volumes")
	found := false
	for _, v := range vols {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		found = found || name == "ovnt-master-tls"
	}
	if !found {
		t.Error("the master mounts no Secret ovnt-master-tls")
	}
}

// containerMounts returns a workload container's volume mounts: mount path -> volume name.
func containerMounts(t *testing.T, o *unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	mounts := map[string]string{}
	list, _ := container(t, o, name)["volumeMounts"].([]any)
	for _, m := range list {
		mm, _ := m.(map[string]any)
		path, _ := mm["mountPath"].(string)
		vol, _ := mm["name"].(string)
		mounts[path] = vol
	}
	return mounts
}
