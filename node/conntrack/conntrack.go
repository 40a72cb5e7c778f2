// Package conntrack removes the node's stale connection-tracking entries of UDP and SCTP
// Services. OVN's load balancers pick a backend once per connection and conntrack remembers
// it; a UDP client that keeps sending from one source port keeps its entry (every datagram
// refreshes it), so it stays on a backend that is gone, or on "no backend" after a Service
// without endpoints got its first one. OVN 23.03 has no load balancer option to flush them
// (kube-proxy deletes such entries itself), so the node does.
//
// The entries live in the node's OVS datapath (kernel or userspace), in the zones of the
// logical ports and of the gateway router, so the node asks ovs-vswitchd (dpctl) rather than
// the kernel's netfilter. The rule is level-triggered, as a reconcile: an entry whose
// original destination is a Service frontend (ClusterIP:port, external or ingress IP:port,
// a node IP or the gateway routers' NodePort address at the NodePort) and whose reply source
// is not one of the frontend's current backends is stale. That covers a removed backend, a
// changed target port, and the entry a client made while the Service had no backend (its
// reply source is the frontend itself). TCP is left alone: a TCP connection to a removed
// backend ends by itself (reset or timeout), and a new one picks a new backend.
package conntrack

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
)

// Frontend is an address and port, of one protocol, that a Service's load balancers answer.
type Frontend struct {
	Proto uint8 // IP protocol number: UDP or SCTP
	Addr  netip.AddrPort
}

// Target is one frontend's backends and the Service it belongs to (for logs).
type Target struct {
	Service  string           // namespace/name
	Backends []netip.AddrPort // sorted
}

// Table maps every UDP and SCTP frontend of the implemented Services to its backends.
type Table map[Frontend]Target

// Equal reports whether t and o hold the same frontends and backends.
func (t Table) Equal(o Table) bool {
	if len(t) != len(o) {
		return false
	}
	for f, a := range t {
		b, ok := o[f]
		if !ok || a.Service != b.Service || !slices.Equal(a.Backends, b.Backends) {
			return false
		}
	}
	return true
}

// Desired is the table of svcs and their slices, read as the master's load balancers read
// them (svcmodel): a frontend's backends are the Service port's usable endpoints
// (svcmodel.Usable) and this node's (svcmodel.LocalUsable, what the traffic policies Local
// leave on node), so an entry is kept if any of this node's load balancers could have made
// it. NodePorts are frontends on every node IP (pods reach any node's NodePort through their
// switch's load balancer) and on contract.NodePortGatewayIP (the gateway routers' address for
// them); external and ingress IPs are those policy admits.
func Desired(svcs []*corev1.Service, eps []*discovery.EndpointSlice, node string, nodeIPs []netip.Addr, policy svcmodel.ExternalIPPolicy) Table {
	bySvc := map[[2]string][]*discovery.EndpointSlice{}
	for _, s := range eps {
		if name := s.Labels[discovery.LabelServiceName]; name != "" {
			k := [2]string{s.Namespace, name}
			bySvc[k] = append(bySvc[k], s)
		}
	}
	t := Table{}
	for _, svc := range svcs {
		if !svcmodel.Implemented(svc) {
			continue
		}
		ports, _ := svcmodel.Ports(svc) // problems are the master's to report
		clusterIPs, _ := svcmodel.ClusterIPs(svc)
		external, _ := svcmodel.ExternalIPs(svc, policy)
		name := svc.Namespace + "/" + svc.Name
		for _, p := range ports {
			if p.Proto == svcmodel.TCP || p.Port <= 0 || p.Port > 65535 {
				continue
			}
			all := svcmodel.Endpoints(bySvc[[2]string{svc.Namespace, svc.Name}], p)
			var backends []netip.AddrPort
			for _, e := range append(svcmodel.Usable(all, svc), svcmodel.LocalUsable(all, svc, node)...) {
				backends = append(backends, e.AddrPort())
			}
			slices.SortFunc(backends, netip.AddrPort.Compare)
			tg := Target{Service: name, Backends: slices.Compact(backends)}
			proto := p.Proto.IPProto()
			for _, ip := range append(slices.Clone(clusterIPs), external...) {
				t[Frontend{proto, netip.AddrPortFrom(ip, uint16(p.Port))}] = tg
			}
			if p.NodePort > 0 && p.NodePort <= 65535 {
				for _, ip := range append([]netip.Addr{contract.NodePortGatewayIP}, nodeIPs...) {
					t[Frontend{proto, netip.AddrPortFrom(ip, uint16(p.NodePort))}] = tg
				}
			}
		}
	}
	return t
}

// WithManagementAddress returns t where every backend at nodeIP also counts at mgmtIP, the
// node's management port address, on the same port: this node's switch and gateway router
// load balancers write the node's own host-network endpoints so (master/services README,
// "Host-network endpoints"), and their entries' reply source is that address. t is left as
// it is; with an invalid address the result is t.
func (t Table) WithManagementAddress(nodeIP, mgmtIP netip.Addr) Table {
	if !nodeIP.IsValid() || !mgmtIP.IsValid() {
		return t
	}
	out := make(Table, len(t))
	for f, tg := range t {
		bs := tg.Backends
		for _, b := range tg.Backends {
			if b.Addr() == nodeIP {
				bs = append(slices.Clone(bs), netip.AddrPortFrom(mgmtIP, b.Port()))
			}
		}
		if len(bs) != len(tg.Backends) {
			slices.SortFunc(bs, netip.AddrPort.Compare)
			tg.Backends = slices.Compact(bs)
		}
		out[f] = tg
	}
	return out
}

// Conn is one conntrack entry as ovs-vswitchd's dpctl/dump-conntrack shows it.
type Conn struct {
	Proto    uint8
	Zone     uint16
	OrigSrc  netip.AddrPort
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
}

func (c Conn) String() string {
	return fmt.Sprintf("proto %d zone %d %s -> %s (reply from %s)", c.Proto, c.Zone, c.OrigSrc, c.OrigDst, c.ReplySrc)
}

// Stale are the conns of t's frontends whose reply source is not one of the frontend's
// backends, with the Service each belongs to.
func (t Table) Stale(conns []Conn) map[string][]Conn {
	out := map[string][]Conn{}
	for _, c := range conns {
		tg, ok := t[Frontend{c.Proto, c.OrigDst}]
		if !ok {
			continue
		}
		if _, found := slices.BinarySearchFunc(tg.Backends, c.ReplySrc, netip.AddrPort.Compare); !found {
			out[tg.Service] = append(out[tg.Service], c)
		}
	}
	return out
}

// protoNames are the dump's protocol names of the protocols cleaned.
var protoNames = map[string]uint8{"udp": 17, "sctp": 132}

// ParseDump reads dpctl/dump-conntrack's text, one entry a line:
//
//	udp,orig=(src=A,dst=B,sport=1,dport=2),reply=(src=C,dst=A,sport=3,dport=1),zone=7,...
//
// It keeps the UDP and SCTP IPv4 entries, and says which lines of those it could not read.
func ParseDump(text string) ([]Conn, error) {
	var out []Conn
	var bad []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		proto, rest, _ := strings.Cut(line, ",")
		p, ok := protoNames[proto]
		if !ok {
			continue
		}
		c, err := parseConn(p, rest)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q: %v", line, err))
			continue
		}
		if c.OrigDst.Addr().Is4() {
			out = append(out, c)
		}
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("unreadable conntrack entries: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

func parseConn(proto uint8, rest string) (Conn, error) {
	c := Conn{Proto: proto}
	orig, ok := section(rest, "orig=(")
	if !ok {
		return c, fmt.Errorf("no orig tuple")
	}
	reply, ok := section(rest, "reply=(")
	if !ok {
		return c, fmt.Errorf("no reply tuple")
	}
	var err error
	if c.OrigSrc, c.OrigDst, err = tuple(orig); err != nil {
		return c, fmt.Errorf("orig: %w", err)
	}
	if c.ReplySrc, _, err = tuple(reply); err != nil {
		return c, fmt.Errorf("reply: %w", err)
	}
	// zone=0 is not printed.
	for _, f := range strings.Split(rest, ",") {
		if v, ok := strings.CutPrefix(f, "zone="); ok {
			z, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return c, fmt.Errorf("zone %q", v)
			}
			c.Zone = uint16(z)
		}
	}
	return c, nil
}

// section is the text between prefix and the next ")".
func section(s, prefix string) (string, bool) {
	_, after, ok := strings.Cut(s, prefix)
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(after, ")")
	return in, ok
}

// tuple reads "src=A,dst=B,sport=1,dport=2".
func tuple(s string) (src, dst netip.AddrPort, err error) {
	f := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	addr := func(ip, port string) (netip.AddrPort, error) {
		a, err := netip.ParseAddr(f[ip])
		if err != nil {
			return netip.AddrPort{}, err
		}
		p, err := strconv.ParseUint(f[port], 10, 16)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%s %q", port, f[port])
		}
		return netip.AddrPortFrom(a, uint16(p)), nil
	}
	if src, err = addr("src", "sport"); err != nil {
		return
	}
	dst, err = addr("dst", "dport")
	return
}

// FlushArgs are dpctl/flush-conntrack's arguments that delete exactly c: its zone and its
// full original tuple (the userspace datapath finds entries by the original, pre-NAT tuple).
func (c Conn) FlushArgs() []string {
	return []string{fmt.Sprintf("zone=%d", c.Zone), fmt.Sprintf("ct_nw_src=%s,ct_nw_dst=%s,ct_nw_proto=%d,ct_tp_src=%d,ct_tp_dst=%d",
		c.OrigSrc.Addr(), c.OrigDst.Addr(), c.Proto, c.OrigSrc.Port(), c.OrigDst.Port())}
}
