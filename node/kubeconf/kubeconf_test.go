package kubeconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review M6: a HostProcess container of containerd 1.6 (Windows Server 2019) finds its
// ServiceAccount below CONTAINER_SANDBOX_MOUNT_POINT; later runtimes, and Linux pods, at
// the standard path, which wins when both exist.
func TestInClusterFindsTheServiceAccount(t *testing.T) {
	std := filepath.Join(t.TempDir(), "var", "run", "secrets", "kubernetes.io", "serviceaccount")
	sandbox := t.TempDir()
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "192.0.2.10", "KUBERNETES_SERVICE_PORT": "6443", "CONTAINER_SANDBOX_MOUNT_POINT": sandbox}
	getenv := func(k string) string { return env[k] }
	write := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"token", "ca.crt"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := inCluster(getenv, std); err == nil || !strings.Contains(err.Error(), "no ServiceAccount token") {
		t.Fatalf("no token anywhere: %v", err)
	}
	below := filepath.Join(sandbox, filepath.FromSlash(std))
	write(below)
	rc, err := inCluster(getenv, std)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://192.0.2.10:6443" || rc.BearerTokenFile != filepath.Join(below, "token") || rc.TLSClientConfig.CAFile != filepath.Join(below, "ca.crt") {
		t.Errorf("below the sandbox mount point: %+v", rc)
	}
	write(std)
	if rc, err := inCluster(getenv, std); err != nil || rc.BearerTokenFile != filepath.Join(std, "token") {
		t.Errorf("standard path: %+v %v", rc, err)
	}
	delete(env, "KUBERNETES_SERVICE_HOST")
	if _, err := inCluster(getenv, std); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("outside a pod: %v", err)
	}
}
