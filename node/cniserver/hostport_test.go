package cniserver

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

type recordNAT struct{ rules []localnat.Rule }

func (r *recordNAT) Sync(_ context.Context, rules []localnat.Rule) error { r.rules = rules; return nil }
func (r *recordNAT) Delete(context.Context) error                        { r.rules = nil; return nil }

// TestHostPorts: the runtime's portMappings resolve to rules on the node IP (or the host IP
// asked for), and a mapping the node cannot open fails with an error naming it.
func TestHostPorts(t *testing.T) {
	node, pod := netip.MustParseAddr("172.18.0.2"), netip.MustParseAddr("10.244.1.5")
	s := &Server{cfg: Config{NodeIP: node, HostPorts: &recordNAT{}}}
	got, err := s.hostPorts([]cni.PortMapping{
		{HostPort: 8090, ContainerPort: 8080},
		{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "0.0.0.0"},
		{HostPort: 9000, ContainerPort: 9000, Protocol: "SCTP", HostIP: "192.0.2.7"},
	}, pod)
	want := []hostPort{
		{Protocol: 6, HostIP: node, HostPort: 8090, PodIP: pod, Port: 8080},
		{Protocol: 17, HostIP: node, HostPort: 5353, PodIP: pod, Port: 53},
		{Protocol: 132, HostIP: netip.MustParseAddr("192.0.2.7"), HostPort: 9000, PodIP: pod, Port: 9000},
	}
	if err != nil || len(got) != len(want) {
		t.Fatalf("hostPorts: %v (%v)", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []struct {
		m    cni.PortMapping
		want string
	}{
		{cni.PortMapping{HostPort: 80, ContainerPort: 80, Protocol: "icmp"}, `protocol "icmp"`},
		{cni.PortMapping{HostPort: 0, ContainerPort: 80}, "out of range"},
		{cni.PortMapping{HostPort: 80, ContainerPort: 70000}, "out of range"},
		{cni.PortMapping{HostPort: 80, ContainerPort: 80, HostIP: "fd00::1"}, "IPv4 only"},
		{cni.PortMapping{HostPort: 80, ContainerPort: 80, HostIP: "nonsense"}, `hostIP "nonsense"`},
	} {
		if _, err := s.hostPorts([]cni.PortMapping{bad.m}, pod); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error saying %s", bad.m, err, bad.want)
		}
	}
	none := &Server{cfg: Config{NodeIP: node}}
	if _, err := none.hostPorts([]cni.PortMapping{{HostPort: 80, ContainerPort: 80}}, pod); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("a node without host port support: %v", err)
	}
	if hps, err := none.hostPorts(nil, pod); err != nil || hps != nil {
		t.Errorf("no mappings on such a node: %v %v", hps, err)
	}
}
