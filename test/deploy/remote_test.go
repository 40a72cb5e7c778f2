//go:build linux

package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-transparent/ovn-transparent/images"
)

// TestRemoteControllersManifest: the remote controllers' Deployment (docs/remote-chassis.md)
// is one replica that is never two at once (Recreate), and its container finds the Secret
// ovnt-remote-chassis where --cert-dir says and has its run directory on a volume of its own
// (the root file system is read-only). TestManifestsFlags checks its flags against the binary,
// TestManifestsWorkloads its account, OS and network.
func TestRemoteControllersManifest(t *testing.T) {
	all, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	d := findObject(t, all, "Deployment", "ovnt-remote-controllers")
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	strategy, _, _ := unstructured.NestedString(d.Object, "spec", "strategy", "type")
	if replicas != 1 || strategy != "Recreate" {
		t.Errorf("replicas %d, strategy %q: want 1 and Recreate (two ovn-controllers for one chassis fight)", replicas, strategy)
	}
	volumes, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	secrets, emptyDirs := map[string]string{}, map[string]bool{}
	for _, v := range volumes {
		vm := v.(map[string]any)
		name, _, _ := unstructured.NestedString(vm, "name")
		secrets[name], _, _ = unstructured.NestedString(vm, "secret", "secretName")
		_, emptyDirs[name], _ = unstructured.NestedMap(vm, "emptyDir")
	}
	env := containerEnv(t, d, "remote-controllers")
	mounts := containerMounts(t, d, "remote-controllers")
	if vol := mounts[env["OVNT_CERT_DIR"]]; secrets[vol] != "ovnt-remote-chassis" {
		t.Errorf("OVNT_CERT_DIR=%q holds volume %q of Secret %q, want the Secret ovnt-remote-chassis", env["OVNT_CERT_DIR"], vol, secrets[vol])
	}
	if vol := mounts[env["OVNT_RUNDIR"]]; !emptyDirs[vol] {
		t.Errorf("OVNT_RUNDIR=%q is not an emptyDir volume (mounts %v)", env["OVNT_RUNDIR"], mounts)
	}
}
