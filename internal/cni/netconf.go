package cni

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// PluginType is the plugin's "type" in a network configuration: the binary's name.
const PluginType = "ovnt-cni"

// NetworkName is the "name" of the network the node agent configures.
const NetworkName = "ovn-transparent"

// ConfListName is the file the node agent writes into the runtime's CNI configuration
// directory; "10-" sorts it ahead of most other plugins' files.
const ConfListName = "10-ovn-transparent.conflist"

// SupportedVersions are the CNI specification versions the plugin and the agent speak.
var SupportedVersions = []string{"0.4.0", "1.0.0", "1.1.0"}

// NetConf is the plugin's network configuration: the common CNI fields and ours.
type NetConf struct {
	types.PluginConf
	// Socket is where the plugin reaches the node agent; empty means the platform's default.
	Socket string `json:"socket,omitempty"`
	// RuntimeConfig holds what the runtime passes for the capabilities the plugin declares:
	// "dns", the pod's resolver, which Windows pods get from their HNS endpoint.
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// RuntimeConfig is the part of the runtime's runtimeConfig the plugin reads.
type RuntimeConfig struct {
	DNS *RuntimeDNS `json:"dns,omitempty"`
	// PortMappings is the "portMappings" capability: the pod's hostPorts.
	PortMappings []PortMapping `json:"portMappings,omitempty"`
}

// PortMapping is one hostPort of a pod: connections to HostIP:HostPort (HostIP empty: the
// node's address) reach the pod's ContainerPort.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"` // tcp, udp or sctp; empty is tcp
	HostIP        string `json:"hostIP,omitempty"`
}

// RuntimeDNS is the "dns" capability: the servers and the pod namespace's search list.
type RuntimeDNS struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// ParseNetConf decodes the configuration the runtime passed on stdin.
func ParseNetConf(stdin []byte) (NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return NetConf{}, types.NewError(types.ErrDecodingFailure, "decoding the network configuration", err.Error())
	}
	return c, nil
}

// ConfListVersion is the cniVersion of the installed configuration list. Runtimes built on
// libcni before 1.2 (containerd 1.6 and 1.7) know results only up to 1.0.0 and refuse a
// list that asks for more; libcni 1.2 and later read ConfListVersions and pick the highest
// version both sides know, so they call the plugin at 1.1.0 (with STATUS and GC).
const ConfListVersion = "1.0.0"

// ConfListVersions is the installed list's "cniVersions": every version the list may be
// called at by a runtime that reads it.
var ConfListVersions = []string{"1.0.0", "1.1.0"}

// ConfList returns the network configuration list the node agent installs: one plugin,
// ovnt-cni, that reaches the agent at socket.
func ConfList(socket string) ([]byte, error) {
	type plugin struct {
		Type   string `json:"type"`
		Socket string `json:"socket"`
		// dns: kubelet's resolver settings reach the plugin (used on Windows, where the
		// pod's resolver is its HNS endpoint's); portMappings: the pod's hostPorts.
		Capabilities map[string]bool `json:"capabilities"`
	}
	list := struct {
		CNIVersion  string   `json:"cniVersion"`
		CNIVersions []string `json:"cniVersions"`
		Name        string   `json:"name"`
		Plugins     []plugin `json:"plugins"`
	}{ConfListVersion, ConfListVersions, NetworkName, []plugin{{PluginType, socket, map[string]bool{"dns": true, "portMappings": true}}}}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// PodArgs are the Kubernetes fields a container runtime puts into CNI_ARGS.
type PodArgs struct {
	Namespace, Name, UID string
}

// String is "namespace/name", how every error names the pod.
func (p PodArgs) String() string { return p.Namespace + "/" + p.Name }

// ParsePodArgs reads K8S_POD_NAMESPACE, K8S_POD_NAME and K8S_POD_UID from a CNI_ARGS value
// ("K1=V1;K2=V2"); other keys are ignored. The namespace and name are required, the UID is
// not (older runtimes do not send it).
func ParsePodArgs(args string) (PodArgs, error) {
	var p PodArgs
	for _, kv := range strings.Split(args, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return PodArgs{}, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %q is not KEY=VALUE", kv), "")
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			p.Namespace = v
		case "K8S_POD_NAME":
			p.Name = v
		case "K8S_POD_UID":
			p.UID = v
		}
	}
	if p.Namespace == "" || p.Name == "" {
		return PodArgs{}, types.NewError(types.ErrInvalidEnvironmentVariables,
			"CNI_ARGS has no K8S_POD_NAMESPACE and K8S_POD_NAME: not a Kubernetes pod", args)
	}
	return p, nil
}
