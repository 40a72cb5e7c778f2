package hostnet

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// SetupManagementPort adds the internal port and converges its device, which ovs-vswitchd
// creates for it (a tap device on the userspace datapath).
func (linuxHost) SetupManagementPort(ctx context.Context, m ManagementPort) error {
	if err := m.AddPort(ctx); err != nil {
		return err
	}
	// On the userspace datapath the node's kernel sees every frame on the veths attached to
	// OVS and, with the default arp_ignore=0, answers ARP for any of its addresses on any
	// interface. Once the node has an address in the pod subnet (this port's), pods would
	// cache it with the MAC of their own veth's host end. arp_announce=2 keeps the node from
	// announcing one interface's address from another.
	for key, value := range map[string]string{
		"net.ipv4.conf.all.arp_ignore":   "1",
		"net.ipv4.conf.all.arp_announce": "2",
	} {
		if err := setSysctl(key, value); err != nil {
			return err
		}
	}
	link, err := waitLink(ctx, m.IfName)
	if err != nil {
		return err
	}
	if err := setMACAndMTU(link, m); err != nil {
		return err
	}
	if err := disableTxChecksum(m.IfName); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", m.IfName, err)
	}
	if err := convergeAddrs(link, []netip.Prefix{m.IP}); err != nil {
		return err
	}
	return convergeRoutes(link, m)
}

// setMACAndMTU fixes what the switch did not set yet. A tap device refuses a new MAC while
// up, so the link goes down for the change.
func setMACAndMTU(link netlink.Link, m ManagementPort) error {
	if !bytes.Equal(link.Attrs().HardwareAddr, m.MAC) {
		if err := netlink.LinkSetDown(link); err != nil {
			return fmt.Errorf("setting %s down: %w", m.IfName, err)
		}
		if err := netlink.LinkSetHardwareAddr(link, m.MAC); err != nil {
			return fmt.Errorf("setting MAC %s on %s: %w", m.MAC, m.IfName, err)
		}
	}
	if m.MTU > 0 && link.Attrs().MTU != m.MTU {
		if err := netlink.LinkSetMTU(link, m.MTU); err != nil {
			return fmt.Errorf("setting MTU %d on %s: %w", m.MTU, m.IfName, err)
		}
	}
	return nil
}

// convergeAddrs makes want the link's only global addresses: a node whose subnet changed
// must not keep the old one.
func convergeAddrs(link netlink.Link, want []netip.Prefix) error {
	have, err := globalAddrs(link)
	if err != nil {
		return err
	}
	for _, a := range have {
		if p, ok := prefixOf(a.IPNet); ok && !slices.Contains(want, p) {
			if err := netlink.AddrDel(link, &a); err != nil {
				return fmt.Errorf("removing stale %s from %s: %w", p, link.Attrs().Name, err)
			}
		}
	}
	for _, p := range want {
		if err := addAddr(link, p); err != nil {
			return err
		}
	}
	return nil
}

// convergeRoutes points m.Routes at the gateway through the link and removes other routes
// the agent made on it (the kernel's own, for the link's subnet, stay).
func convergeRoutes(link netlink.Link, m ManagementPort) error {
	routes, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, family(m.Gateway)) })
	if err != nil {
		return fmt.Errorf("routes of %s: %w", m.IfName, err)
	}
	for _, r := range routes {
		dst, ok := prefixOf(r.Dst)
		if r.Protocol == unix.RTPROT_KERNEL || !ok || slices.Contains(m.Routes, dst) {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			return fmt.Errorf("removing stale route to %s on %s: %w", dst, m.IfName, err)
		}
	}
	for _, dst := range m.Routes {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst), Gw: m.Gateway.AsSlice()}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route to %s via %s on %s: %w", dst, m.Gateway, m.IfName, err)
		}
	}
	return nil
}
