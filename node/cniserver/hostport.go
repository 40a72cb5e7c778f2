package cniserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

// KeyHostPorts is the Interface external_id that records a pod's host ports (JSON, a list
// of hostPort), so the node's rules can be rebuilt from the switch alone: after an agent
// restart, and whenever a port comes or goes.
const KeyHostPorts = "ovnt-hostports"

// hostPort is one opened host port: connections to HostIP:HostPort reach PodIP:Port.
type hostPort struct {
	Protocol uint8      `json:"protocol"` // IP protocol number
	HostIP   netip.Addr `json:"hostIP"`
	HostPort uint16     `json:"hostPort"`
	PodIP    netip.Addr `json:"podIP"`
	Port     uint16     `json:"port"`
}

// hostPorts resolves the runtime's portMappings for a pod at podIP: the protocol by name,
// an empty or unspecified host IP as the node's address. A mapping the node cannot open is
// an error that names it.
func (s *Server) hostPorts(mappings []cni.PortMapping, podIP netip.Addr) ([]hostPort, error) {
	if len(mappings) == 0 {
		return nil, nil
	}
	if s.cfg.HostPorts == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "hostPort is not supported on this node", fmt.Sprint(mappings))
	}
	var out []hostPort
	for _, m := range mappings {
		proto, ok := svcmodel.ParseProto(corev1.Protocol(strings.ToUpper(m.Protocol)))
		host := s.cfg.NodeIP
		if m.HostIP != "" {
			a, err := netip.ParseAddr(m.HostIP)
			if err != nil {
				return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("hostPort %d: hostIP %q", m.HostPort, m.HostIP), err.Error())
			}
			if !a.IsUnspecified() {
				host = a
			}
		}
		switch {
		case !ok:
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("hostPort %d: protocol %q", m.HostPort, m.Protocol), "")
		case m.HostPort < 1 || m.HostPort > 65535 || m.ContainerPort < 1 || m.ContainerPort > 65535:
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("hostPort %d -> containerPort %d: out of range", m.HostPort, m.ContainerPort), "")
		case !host.Is4() || !podIP.Is4():
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("hostPort %d: IPv4 only (host %s, pod %s)", m.HostPort, host, podIP), "")
		}
		out = append(out, hostPort{Protocol: proto.IPProto(), HostIP: host, HostPort: uint16(m.HostPort), PodIP: podIP, Port: uint16(m.ContainerPort)})
	}
	return out, nil
}

// SyncHostPorts makes the node's host port rules those the pod ports on br-int record: at
// every ADD and DEL of a port with host ports, and when the agent starts.
func (s *Server) SyncHostPorts(ctx context.Context) error {
	if s.cfg.HostPorts == nil {
		return nil
	}
	ifaces, err := s.sw.InterfacesWith(ctx, KeyHostPorts)
	if err != nil {
		return err
	}
	var rules []localnat.Rule
	for _, i := range ifaces {
		var hps []hostPort
		if err := json.Unmarshal([]byte(i.ExternalIDs[KeyHostPorts]), &hps); err != nil {
			s.log.Error(err, "ignoring unreadable host ports of a pod port", "port", i.Name, "pod", i.ExternalIDs[KeyPod])
			continue
		}
		for _, h := range hps {
			rules = append(rules, localnat.Rule{Protocol: h.Protocol, NodeIP: h.HostIP, NodePort: h.HostPort, ClusterIP: h.PodIP, Port: h.Port})
		}
	}
	if err := s.cfg.HostPorts.Sync(ctx, rules); err != nil {
		return fmt.Errorf("host ports: %w", err)
	}
	return nil
}
