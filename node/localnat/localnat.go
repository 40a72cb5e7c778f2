// Package localnat lets the node reach its own NodePorts, and opens pods' host ports. A connection the host opens to its
// own node IP never crosses the gateway bridge (the kernel delivers it locally), so the
// gateway router's load balancers never see it. The node rewrites such connections itself:
// nodeIP:nodePort becomes the Service's ClusterIP:port, which the host reaches through the
// management port like any ClusterIP, and the source becomes the management port's address
// so the answer comes back the same way (from the node IP it would leave through the
// gateway router). An externalTrafficPolicy=Local NodePort keeps the node IP as the source
// (Rule.KeepSource), on a port the cluster router sends back through the management port.
//
// A pod's hostPort (the CNI portMappings capability) is the same rewrite, nodeIP:hostPort to
// podIP:containerPort, also for connections that arrive from outside the node (Incoming).
//
// Redirect is the third rewrite: what OVN sends the host at its management port address (a
// Service's load balancers write the node's own host-network endpoints so) is delivered as
// if sent to the node IP, for servers that listen on the node IP only.
//
// Linux does it with nf_tables in one table of its own, replaced atomically at every Sync;
// Windows has no implementation yet.
package localnat

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
)

// Rule sends the host's connections to NodeIP:NodePort to ClusterIP:Port.
type Rule struct {
	// Protocol is the IP protocol number of a Service port's protocol,
	// svcmodel.Proto.IPProto(): TCP, UDP or SCTP.
	Protocol  uint8
	NodeIP    netip.Addr
	NodePort  uint16
	ClusterIP netip.Addr
	Port      uint16
	// KeepSource leaves the connection the node IP as its source (an
	// externalTrafficPolicy=Local NodePort: kube-proxy's short circuit; the backend sees
	// the node) instead of the management port's address, with a source port from
	// contract.ShortCircuitPortMin up: the cluster router sends pods' packets for the node
	// IP at those ports back through the management port. Only for Services whose
	// backends are pods: another host or an address outside the cluster answers the node
	// IP on its own path, past the switch that must undo the DNAT.
	KeepSource bool
}

func (r Rule) String() string {
	s := fmt.Sprintf("%d %s -> %s", r.Protocol, netip.AddrPortFrom(r.NodeIP, r.NodePort), netip.AddrPortFrom(r.ClusterIP, r.Port))
	if r.KeepSource {
		s += " keeping the source"
	}
	return s
}

// Compare orders rules (for stable rule sets).
func (r Rule) Compare(o Rule) int {
	keep := func(r Rule) int {
		if r.KeepSource {
			return 1
		}
		return 0
	}
	for _, c := range []int{int(r.Protocol) - int(o.Protocol), r.NodeIP.Compare(o.NodeIP), int(r.NodePort) - int(o.NodePort),
		r.ClusterIP.Compare(o.ClusterIP), int(r.Port) - int(o.Port), keep(r) - keep(o)} {
		if c != 0 {
			return c
		}
	}
	return 0
}

func (r Rule) validate() error {
	switch {
	case !svcmodel.Proto(r.Protocol).Valid():
		return fmt.Errorf("rule %s: protocol %d", r, r.Protocol)
	case !r.NodeIP.Is4() || !r.ClusterIP.Is4():
		return fmt.Errorf("rule %s: IPv4 only", r)
	case r.NodePort == 0 || r.Port == 0:
		return fmt.Errorf("rule %s: port 0", r)
	}
	return nil
}

// Config says where the rewritten connections leave.
type Config struct {
	// MgmtIface is the management port's interface: connections rewritten by a Rule are
	// masqueraded to its address when they leave through it (or given a short-circuit
	// source port, Rule.KeepSource).
	MgmtIface string
	// Table is the nf_tables table the NAT owns; default TableName. Each user of the
	// package owns a table of its own, since Sync replaces it whole.
	Table string
	// Incoming also rewrites connections that arrive at the node from elsewhere (the
	// uplink, pods reaching the node IP): what a pod's hostPort needs. Local NodePort
	// access rewrites only the host's own.
	Incoming bool
}

// NAT holds the node's local NodePort rules.
type NAT interface {
	// Sync makes the node hold exactly rules, in one atomic step: a rule missing from
	// rules is removed, connections already rewritten keep going. Idempotent; an invalid
	// rule fails the whole call and changes nothing.
	Sync(ctx context.Context, rules []Rule) error
	// Delete removes every rule (the agent's table); nothing to do if there is none.
	Delete(ctx context.Context) error
}

// ErrNotImplemented is New's error on systems without an implementation.
var ErrNotImplemented = errors.New("localnat: local NodePort access is not implemented on this system")

// New returns the system's NAT; ErrNotImplemented where there is none.
func New(cfg Config) (NAT, error) { return newNAT(cfg) }
