//go:build linux

package deployreal

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-transparent/ovn-transparent/images"
)

// TestLinuxManifestsOnBareNodes checks what the Linux workloads need of a node beyond what
// TestManifests' nodes have: every container takes an image the node already has
// (imagePullPolicy IfNotPresent: the image tag :latest alone means Always, which fails for
// an image imported without a registry), and no host path but the node's certificates must
// exist beforehand (a kernel without /lib/modules, as with the userspace datapath, must not
// keep the ovs container from starting).
func TestLinuxManifestsOnBareNodes(t *testing.T) {
	objs, err := images.Objects("30-master.yaml", "40-node-linux.yaml")
	if err != nil {
		t.Fatal(err)
	}
	workloads := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		workloads++
		for _, field := range []string{"initContainers", "containers"} {
			cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				c := c.(map[string]any)
				if c["imagePullPolicy"] != "IfNotPresent" {
					t.Errorf("%s %s: container %s: imagePullPolicy %v, want IfNotPresent", o.GetKind(), o.GetName(), c["name"], c["imagePullPolicy"])
				}
			}
		}
		vols, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vols {
			v := v.(map[string]any)
			hp, ok := v["hostPath"].(map[string]any)
			if !ok {
				continue
			}
			if hp["type"] != "DirectoryOrCreate" && hp["path"] != "/etc/ovn-transparent/pki" {
				t.Errorf("%s %s: host path %v of type %v: a node without it could not start the pod", o.GetKind(), o.GetName(), hp["path"], hp["type"])
			}
		}
	}
	if workloads != 2 {
		t.Fatalf("%d workloads in 30-master.yaml and 40-node-linux.yaml, want the master Deployment and the node DaemonSet", workloads)
	}
}
