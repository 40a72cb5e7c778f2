package localnat

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

type nftRedirect struct{ table string }

func newRedirect(table string) (Redirect, error) { return &nftRedirect{table: table}, nil }

// Sync replaces the table in one netlink batch: "iifname IFACE ip daddr MGMT dnat to NODE"
// in a prerouting nat chain. A nat chain sees only a connection's first packet, so the
// answers to the host's own connections through the port (to the same address) are left
// alone.
func (r *nftRedirect) Sync(_ context.Context, iface string, mgmtIP, nodeIP netip.Addr) error {
	if err := validateRedirect(iface, mgmtIP, nodeIP); err != nil {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("localnat: %w", err)
	}
	t := &nftables.Table{Name: r.table, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(iface)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mgmtIP.AsSlice()},
		&expr.Immediate{Register: 1, Data: nodeIP.AsSlice()},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("localnat: replacing table %s (%s -> %s on %s): %w", r.table, mgmtIP, nodeIP, iface, err)
	}
	return nil
}

func (r *nftRedirect) Delete(ctx context.Context) error {
	return (&nftNAT{cfg: Config{Table: r.table}}).Delete(ctx)
}
