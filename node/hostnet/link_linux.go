package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// New returns the Linux host: veth pairs, netlink and network namespaces. It acts in the
// network namespace the agent runs in (the node's).
// New returns the Linux host. It logs nothing of its own: every failure is returned to the
// agent, which logs it with the object it concerns.
func New(logr.Logger) Host { return linuxHost{} }

type linuxHost struct{}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// retryDump repeats a netlink dump the kernel flagged as interrupted (the table changed
// while it was read), which netlink returns with partial results.
func retryDump[T any](f func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 5 {
		if v, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// globalAddrs lists the addresses of link that belong to it alone: not IPv6 link-local.
func globalAddrs(link netlink.Link) ([]netlink.Addr, error) {
	all, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", link.Attrs().Name, err)
	}
	var out []netlink.Addr
	for _, a := range all {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// addAddr adds p to link (no duplicate address detection for IPv6: the master allocated
// the address, and DAD would hold it unusable for a second).
func addAddr(link netlink.Link, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := netlink.AddrReplace(link, a); err != nil {
		return fmt.Errorf("adding %s to %s: %w", p, link.Attrs().Name, err)
	}
	return nil
}

// waitLink returns the link called name once it exists: OVS creates the device of an
// internal port asynchronously, after the database transaction.
func waitLink(ctx context.Context, name string) (netlink.Link, error) {
	return waitLinkFor(ctx, name, "to appear", func(netlink.Link) bool { return true })
}

// waitLinkFor returns the link called name once it exists and ready says it is as wanted
// (what says how, for the error), waiting at most 30 s.
func waitLinkFor(ctx context.Context, name, what string, ready func(netlink.Link) bool) (netlink.Link, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		link, err := netlink.LinkByName(name)
		if err == nil && ready(link) {
			return link, nil
		}
		var notFound netlink.LinkNotFoundError
		if err != nil && !errors.As(err, &notFound) {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for interface %s %s: %w", name, what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// linkByName returns the link, or nil and no error if there is none.
func linkByName(name string) (netlink.Link, error) {
	link, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	return link, nil
}
