// Package kubeconf gives the node agent (and its doctor) their Kubernetes client
// configuration: a kubeconfig file, or the in-cluster ServiceAccount wherever the runtime
// mounted it.
package kubeconf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountDir is where a pod finds its ServiceAccount's token and CA.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config returns the configuration of kubeconfig, or the in-cluster one when it is empty.
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return rc, nil
	}
	return inCluster(os.Getenv, ServiceAccountDir)
}

// inCluster is rest.InClusterConfig, except for where it looks for the token and the CA:
// in dir, or else, in a HostProcess container of a containerd before 1.7 (the only kind on
// Windows Server 2019), at the same path below CONTAINER_SANDBOX_MOUNT_POINT, where that
// runtime mounts the volume (later ones bind it at dir itself).
func inCluster(getenv func(string) string, dir string) (*rest.Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (pass --kubeconfig outside a pod)")
	}
	tried := []string{dir}
	if root := getenv("CONTAINER_SANDBOX_MOUNT_POINT"); root != "" {
		tried = append(tried, filepath.Join(root, filepath.FromSlash(dir)))
	}
	for _, d := range tried {
		token := filepath.Join(d, "token")
		if _, err := os.Stat(token); err != nil {
			continue
		}
		return &rest.Config{
			Host:            "https://" + net.JoinHostPort(host, port),
			BearerTokenFile: token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(d, "ca.crt")},
		}, nil
	}
	return nil, fmt.Errorf("in-cluster configuration: no ServiceAccount token in %v", tried)
}
