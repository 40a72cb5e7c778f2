package svcmodel

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Proto is a Service port's protocol, one of TCP, UDP and SCTP. Its value is the IP protocol
// number (IANA), so that the node's OpenFlow matches and nf_tables rules take it as it is.
type Proto uint8

// The protocols Services can use; ICMP and the rest have no ports.
const (
	TCP  Proto = 6
	UDP  Proto = 17
	SCTP Proto = 132
)

// ParseProto is the Proto of an API protocol; an empty one is TCP, the API's default.
func ParseProto(p corev1.Protocol) (Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return TCP, true
	case corev1.ProtocolUDP:
		return UDP, true
	case corev1.ProtocolSCTP:
		return SCTP, true
	}
	return 0, false
}

// Valid reports whether p is one of TCP, UDP and SCTP.
func (p Proto) Valid() bool { return p == TCP || p == UDP || p == SCTP }

// IPProto is the IP protocol number, the value of openflow.IPProto* and localnat.Rule.Protocol.
func (p Proto) IPProto() uint8 { return uint8(p) }

// NB is the protocol as the Northbound Load_Balancer's protocol column spells it
// (nbdb.LoadBalancerProtocol*).
func (p Proto) NB() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return ""
}

// String is the API's spelling: TCP, UDP, SCTP.
func (p Proto) String() string {
	switch p {
	case TCP:
		return string(corev1.ProtocolTCP)
	case UDP:
		return string(corev1.ProtocolUDP)
	case SCTP:
		return string(corev1.ProtocolSCTP)
	}
	return fmt.Sprintf("Proto(%d)", uint8(p))
}

// Port is one port of a Service as the data plane implements it.
type Port struct {
	// Name matches the port to its number in each EndpointSlice (see Endpoints).
	Name  string
	Proto Proto
	// Port is the port of the ClusterIPs, external and ingress IPs.
	Port int32
	// NodePort is the port on every node, 0 for none: always 0 unless the Service is a
	// NodePort or LoadBalancer one.
	NodePort int32
}

// Ports are svc's ports in spec order. A port with a protocol other than TCP, UDP and SCTP is
// skipped, and a problem.
func Ports(svc *corev1.Service) ([]Port, []Problem) {
	var out []Port
	var problems []Problem
	for _, sp := range svc.Spec.Ports {
		proto, ok := ParseProto(sp.Protocol)
		if !ok {
			problems = append(problems, Problem{ReasonUnsupportedProtocol,
				fmt.Sprintf("port %q: protocol %q is not supported (TCP, UDP, SCTP); the port is skipped", sp.Name, sp.Protocol)})
			continue
		}
		p := Port{Name: sp.Name, Proto: proto, Port: sp.Port}
		if hasNodePorts(svc) {
			p.NodePort = sp.NodePort
		}
		out = append(out, p)
	}
	return out, problems
}
