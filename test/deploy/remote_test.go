//go:build linux

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
)

// TestRemoteControllerTemplate: the remote controller's Deployment template
// (docs/remote-chassis.md) is one replica that is never two at once, its relay's OVNT_*
// variables are flags of `ovnt-node chassis-relay` with values it accepts, and both
// containers take their certificates from the chassis' Secret and share the run directory
// where ovn-controller finds br-int.mgmt.
func TestRemoteControllerTemplate(t *testing.T) {
	testenv.Integration(t) // builds the binaries
	data, err := os.ReadFile(filepath.Join("..", "..", "images", "manifests", "remote", "ovnt-remote-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d unstructured.Unstructured
	if err := yaml.Unmarshal(data, &d.Object); err != nil {
		t.Fatal(err)
	}
	if d.GetKind() != "Deployment" || d.GetNamespace() != "ovn-transparent" {
		t.Fatalf("%s %s/%s, want a Deployment in ovn-transparent", d.GetKind(), d.GetNamespace(), d.GetName())
	}
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	strategy, _, _ := unstructured.NestedString(d.Object, "spec", "strategy", "type")
	if replicas != 1 || strategy != "Recreate" {
		t.Errorf("replicas %d, strategy %q: want 1 and Recreate (two ovn-controllers for one chassis fight)", replicas, strategy)
	}
	volumes, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	secrets := map[string]string{}
	for _, v := range volumes {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
		secrets[name], _, _ = unstructured.NestedString(v.(map[string]any), "secret", "secretName")
	}
	if secrets["pki"] != "ovnt-remote-chassis-win1" {
		t.Errorf("volume pki from Secret %q, want ovnt-remote-chassis-win1", secrets["pki"])
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 2 {
		t.Fatalf("%d containers, want the relay and ovn-controller", len(containers))
	}
	binDir, err := cluster.BinDir(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range containers {
		cm := c.(map[string]any)
		mounts := map[string]string{}
		vms, _ := cm["volumeMounts"].([]any)
		for _, m := range vms {
			mm := m.(map[string]any)
			mounts[mm["name"].(string)] = mm["mountPath"].(string)
		}
		if mounts["run"] != "/run/ovnt-remote" || mounts["pki"] != "/etc/ovn-transparent/remote" {
			t.Errorf("container %s mounts %v, want run at /run/ovnt-remote and pki at /etc/ovn-transparent/remote", cm["name"], mounts)
		}
		if cm["name"] != "chassis-relay" {
			continue
		}
		args := []string{"chassis-relay"}
		envs, _ := cm["env"].([]any)
		for _, e := range envs {
			em := e.(map[string]any)
			name := em["name"].(string)
			flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "OVNT_"), "_", "-"))
			args = append(args, "--"+flag+"="+em["value"].(string))
		}
		out, err := exec.CommandContext(t.Context(), filepath.Join(binDir, "ovnt-node"), append(args, "--help")...).CombinedOutput()
		if err != nil {
			t.Errorf("ovnt-node %v: %v\n%s", args, err, firstLine(out))
		}
	}
}
