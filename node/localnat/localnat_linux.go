package localnat

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// TableName is the agent's nf_tables table (family ip). It holds nothing else: every Sync
// replaces it whole.
const TableName = "ovnt-local-nodeport"

// ipsDstNAT is the conntrack status bit IPS_DST_NAT: the connection was DNATed.
const ipsDstNAT = 1 << 5

// ctDirOriginal is IP_CT_DIR_ORIGINAL: a conntrack key of the connection's first packet.
const ctDirOriginal = 0

type nftNAT struct{ cfg Config }

func newNAT(cfg Config) (NAT, error) {
	if cfg.MgmtIface == "" || len(cfg.MgmtIface) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("localnat: management interface name %q", cfg.MgmtIface)
	}
	if cfg.Table == "" {
		cfg.Table = TableName
	}
	return &nftNAT{cfg: cfg}, nil
}

// Sync sends, in one netlink batch (one nf_tables transaction, so no moment without the
// rules): add the table (a no-op if it exists), delete it, and add it again with the chains
// and rules. Deleting the table takes any rule an operator added to it as well.
func (n *nftNAT) Sync(_ context.Context, rules []Rule) error {
	rules = slices.Clone(rules)
	slices.SortFunc(rules, Rule.Compare)
	rules = slices.Compact(rules)
	for _, r := range rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("localnat: %w", err)
		}
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("localnat: %w", err)
	}
	t := &nftables.Table{Name: n.cfg.Table, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	// The output hook sees only the host's own packets: pods' traffic to a NodePort goes
	// through OVN, and the uplink's through the gateway bridge.
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	for _, r := range rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: dnatExprs(r)})
	}
	if n.cfg.Incoming {
		pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
		for _, r := range rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: dnatExprs(r)})
		}
	}
	// The source the host chose for a local destination is the node IP; the backend's
	// answer to it would leave OVN through the gateway router. The management port's
	// address brings it back through the management port. Only connections that one of
	// these rules DNATed are masqueraded, by their original destination: another table's
	// DNAT to a pod would otherwise leave from the management port's address, which every
	// NetworkPolicy admits (the node's own probes).
	// A rule that keeps the source (an externalTrafficPolicy=Local NodePort) SNATs to the
	// node IP instead, at a short-circuit port, which the cluster router routes back
	// through the management port.
	for _, r := range rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: sourceExprs(n.cfg.MgmtIface, r)})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("localnat: replacing table %s (%d rules): %w", n.cfg.Table, len(rules), err)
	}
	return nil
}

// dnatExprs is "meta l4proto P ip daddr NodeIP th dport NodePort dnat to ClusterIP:Port".
func dnatExprs(r Rule) []expr.Any {
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.Protocol}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: r.NodeIP.AsSlice()},
		// TCP, UDP and SCTP all carry the destination port at offset 2.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port(r.NodePort)},
		&expr.Immediate{Register: 1, Data: r.ClusterIP.AsSlice()},
		&expr.Immediate{Register: 2, Data: port(r.Port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// sourceExprs is "oifname MGMT meta l4proto P ct original ip daddr NodeIP ct original
// proto-dst NodePort ct status dnat masquerade", or with KeepSource "... snat to
// NodeIP:ShortCircuitPortMin-65535".
func sourceExprs(mgmt string, r Rule) []expr.Any {
	var nat []expr.Any
	if r.KeepSource {
		nat = []expr.Any{
			&expr.Immediate{Register: 1, Data: r.NodeIP.AsSlice()},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, contract.ShortCircuitPortMin)},
			&expr.Immediate{Register: 3, Data: binary.BigEndian.AppendUint16(nil, 65535)},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, RegProtoMax: 3, Specified: true},
		}
	} else {
		nat = []expr.Any{&expr.Masq{}}
	}
	return append([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(mgmt)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.Protocol}},
		&expr.Ct{Key: expr.CtKeyDST, Direction: ctDirOriginal, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: r.NodeIP.AsSlice()},
		&expr.Ct{Key: expr.CtKeyPROTODST, Direction: ctDirOriginal, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, r.NodePort)},
		&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}, nat...)
}

// ifname is an interface name as nf_tables compares it: IFNAMSIZ bytes, NUL padded.
func ifname(s string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, s)
	return b
}

// Delete removes the table: add-then-delete in one batch, so a missing table is no error.
func (n *nftNAT) Delete(context.Context) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("localnat: %w", err)
	}
	t := &nftables.Table{Name: n.cfg.Table, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("localnat: deleting table %s: %w", n.cfg.Table, err)
	}
	return nil
}
