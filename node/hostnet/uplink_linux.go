package hostnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func (linuxHost) SetupUplink(ctx context.Context, u Uplink) (NodeAddress, error) {
	if u.Iface == "" {
		return nodeAddress(u.PreferIP)
	}
	uplink, err := netlink.LinkByName(u.Iface)
	if err != nil {
		return NodeAddress{}, fmt.Errorf("uplink %s: %w", u.Iface, err)
	}
	// The bridge takes the uplink's MAC: the physical network keeps seeing the node at the
	// address it knows, and the gateway router can share it.
	if err := u.Attach(ctx, uplink.Attrs().HardwareAddr); err != nil {
		return NodeAddress{}, err
	}
	// ovs-vswitchd gives the bridge's device the MAC (other_config:hwaddr) some time after it
	// creates it: reading it earlier publishes a random MAC as the node's.
	mac := uplink.Attrs().HardwareAddr
	br, err := waitLinkFor(ctx, u.Bridge, "to take the MAC "+mac.String(), func(l netlink.Link) bool {
		return bytes.Equal(l.Attrs().HardwareAddr, mac)
	})
	if err != nil {
		return NodeAddress{}, err
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return NodeAddress{}, fmt.Errorf("setting %s up: %w", u.Bridge, err)
	}
	if err := moveAddresses(uplink, br); err != nil {
		return NodeAddress{}, fmt.Errorf("moving the node's addresses from %s to %s: %w", u.Iface, u.Bridge, err)
	}
	return addressOn(br, u.PreferIP)
}

// moveAddresses moves from's addresses and routes to to. The userspace datapath sends
// tunnel packets only from an address on a bridge's own interface, and a device that is a
// bridge port must not keep an address (the kernel would answer on it behind OVS's back).
//
// To stay reachable, the addresses are added to the bridge first, then each route is
// replaced by the same route through the bridge (one atomic change per route), and only
// then are the addresses removed from the uplink. On failure everything is put back. A
// restart finds no address on the uplink and does nothing.
func moveAddresses(from, to netlink.Link) error {
	addrs, err := globalAddrs(from)
	if err != nil {
		return err
	}
	routes, err := movableRoutes(from)
	if err != nil {
		return err
	}
	if len(addrs) == 0 && len(routes) == 0 {
		return nil
	}
	success := false
	var added []netlink.Addr
	defer func() {
		if success {
			return
		}
		for _, a := range added {
			netlink.AddrDel(to, &a)
		}
		for _, a := range addrs {
			netlink.AddrReplace(from, &a)
		}
		for _, r := range routes {
			netlink.RouteReplace(&r)
		}
	}()
	for _, a := range addrs {
		moved := a
		moved.Label = "" // a label must start with the device's name
		moved.LinkIndex = to.Attrs().Index
		if err := netlink.AddrReplace(to, &moved); err != nil {
			return fmt.Errorf("adding %s: %w", a.IPNet, err)
		}
		added = append(added, moved)
	}
	for _, r := range routes {
		moved := r
		moved.LinkIndex = to.Attrs().Index
		if err := netlink.RouteReplace(&moved); err != nil {
			return fmt.Errorf("moving route %s: %w", r, err)
		}
	}
	for _, a := range addrs {
		if err := netlink.AddrDel(from, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("removing %s: %w", a.IPNet, err)
		}
	}
	success = true
	return nil
}

// movableRoutes lists link's routes in the main table that someone configured (the kernel's
// own subnet routes follow their addresses).
func movableRoutes(link netlink.Link) ([]netlink.Route, error) {
	all, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("routes of %s: %w", link.Attrs().Name, err)
	}
	var out []netlink.Route
	for _, r := range all {
		if r.Protocol == unix.RTPROT_KERNEL || (r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast()) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// addressOn returns the node address held by link: prefer if it holds it, else its first
// IPv4 address, else its first address.
func addressOn(link netlink.Link, prefer netip.Addr) (NodeAddress, error) {
	addrs, err := globalAddrs(link)
	if err != nil {
		return NodeAddress{}, err
	}
	var pick netip.Prefix
	for _, a := range addrs {
		p, ok := prefixOf(a.IPNet)
		if !ok {
			continue
		}
		switch {
		case prefer.IsValid() && p.Addr() == prefer:
			pick = p
		case !pick.IsValid(), !prefer.IsValid() && p.Addr().Is4() && !pick.Addr().Is4():
			pick = p
		}
	}
	if !pick.IsValid() {
		return NodeAddress{}, fmt.Errorf("%s has no address", link.Attrs().Name)
	}
	if prefer.IsValid() && pick.Addr() != prefer {
		return NodeAddress{}, fmt.Errorf("%s does not hold %s", link.Attrs().Name, prefer)
	}
	na := NodeAddress{IfName: link.Attrs().Name, IP: pick, MAC: link.Attrs().HardwareAddr}
	na.NextHop, err = defaultGateway(family(pick.Addr()))
	return na, err
}

// defaultGateway returns the next hop of the main table's default route, or zero.
func defaultGateway(fam int) (netip.Addr, error) {
	routes, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, fam) })
	if err != nil {
		return netip.Addr{}, fmt.Errorf("routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || isZeroMask(r.Dst.Mask)) && r.Gw != nil {
			return addrOf(r.Gw), nil
		}
	}
	return netip.Addr{}, nil
}

// nodeAddress finds the node's address without a gateway bridge: on the interface holding
// prefer, else on the interface of the default route.
func nodeAddress(prefer netip.Addr) (NodeAddress, error) {
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return NodeAddress{}, fmt.Errorf("interfaces: %w", err)
	}
	if prefer.IsValid() {
		for _, l := range links {
			if na, err := addressOn(l, prefer); err == nil {
				return na, nil
			}
		}
		return NodeAddress{}, fmt.Errorf("no interface holds %s", prefer)
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return NodeAddress{}, fmt.Errorf("routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst != nil && !isZeroMask(r.Dst.Mask) {
			continue
		}
		for _, l := range links {
			if l.Attrs().Index == r.LinkIndex {
				return addressOn(l, netip.Addr{})
			}
		}
	}
	return NodeAddress{}, errors.New("no default route: cannot tell the node's address (give --encap-ip)")
}
