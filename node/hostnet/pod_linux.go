package hostnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/ovn-transparent/ovn-transparent/internal/netns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CreatePodInterface: a veth pair whose pod end is created directly inside the pod's
// namespace under its final name, so nothing of the pod ever appears in the node's namespace
// and no rename can collide with a node interface.
func (linuxHost) CreatePodInterface(ctx context.Context, p PodInterface) (Attached, error) {
	host, err := linkByName(p.HostIfName)
	if err != nil {
		return Attached{}, err
	}
	if host != nil {
		if err := checkPod(p, host); err != nil {
			return Attached{}, fmt.Errorf("host interface %s exists but is not this pod's: %w", p.HostIfName, err)
		}
		return Attached{HostIfName: p.HostIfName, HostMAC: host.Attrs().HardwareAddr}, nil
	}
	nsFile, err := os.Open(p.Netns)
	if err != nil {
		return Attached{}, fmt.Errorf("network namespace: %w", err)
	}
	defer nsFile.Close()
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: p.HostIfName, MTU: p.MTU},
		PeerName:         p.IfName,
		PeerHardwareAddr: p.MAC,
		PeerMTU:          uint32(p.MTU),
		PeerNamespace:    netlink.NsFd(int(nsFile.Fd())),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return Attached{}, fmt.Errorf("creating veth %s with peer %s in %s: %w", p.HostIfName, p.IfName, p.Netns, err)
	}
	success := false
	defer func() {
		if !success {
			// Deleting one end deletes both.
			netlink.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.HostIfName}})
		}
	}()
	if err := netns.Do(p.Netns, func() error { return configurePodSide(p) }); err != nil {
		return Attached{}, err
	}
	host, err = netlink.LinkByName(p.HostIfName)
	if err != nil {
		return Attached{}, fmt.Errorf("host interface %s: %w", p.HostIfName, err)
	}
	if err := disableTxChecksum(p.HostIfName); err != nil {
		return Attached{}, err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return Attached{}, fmt.Errorf("setting %s up: %w", p.HostIfName, err)
	}
	success = true
	return Attached{HostIfName: p.HostIfName, HostMAC: host.Attrs().HardwareAddr, Created: true}, nil
}

// configurePodSide runs inside the pod's namespace: checksum offload, addresses, link up,
// default route through each gateway, and the extra routes.
func configurePodSide(p PodInterface) error {
	link, err := netlink.LinkByName(p.IfName)
	if err != nil {
		return fmt.Errorf("pod interface %s: %w", p.IfName, err)
	}
	if err := disableTxChecksum(p.IfName); err != nil {
		return err
	}
	for _, ip := range p.IPs {
		if err := addAddr(link, ip); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", p.IfName, err)
	}
	for _, gw := range p.Gateways {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice(), Family: family(gw)}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	for _, rt := range p.Routes {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(rt.Dest), Gw: rt.NextHop.AsSlice()}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route to %s via %s: %w", rt.Dest, rt.NextHop, err)
		}
	}
	return nil
}

func (linuxHost) CheckPodInterface(ctx context.Context, p PodInterface) error {
	host, err := linkByName(p.HostIfName)
	if err != nil {
		return err
	}
	if host == nil {
		return fmt.Errorf("host interface %s does not exist", p.HostIfName)
	}
	return checkPod(p, host)
}

// checkPod compares the pod side of host's veth with p.
func checkPod(p PodInterface, host netlink.Link) error {
	if host.Type() != "veth" {
		return fmt.Errorf("%s is a %s, not a veth", p.HostIfName, host.Type())
	}
	hostIndex := host.Attrs().Index
	return netns.Do(p.Netns, func() error {
		link, err := netlink.LinkByName(p.IfName)
		if err != nil {
			return fmt.Errorf("pod interface %s in %s: %w", p.IfName, p.Netns, err)
		}
		// The pod end of a veth names its peer's index in IFLA_LINK.
		if link.Attrs().ParentIndex != hostIndex {
			return fmt.Errorf("pod interface %s is not the peer of %s", p.IfName, p.HostIfName)
		}
		if !bytes.Equal(link.Attrs().HardwareAddr, p.MAC) {
			return fmt.Errorf("pod interface %s has MAC %s, want %s", p.IfName, link.Attrs().HardwareAddr, p.MAC)
		}
		if err := hasAddrs(link, p); err != nil {
			return err
		}
		return hasDefaultRoutes(link, p)
	})
}

func hasAddrs(link netlink.Link, p PodInterface) error {
	addrs, err := globalAddrs(link)
	if err != nil {
		return err
	}
	for _, want := range p.IPs {
		found := false
		for _, a := range addrs {
			if got, ok := prefixOf(a.IPNet); ok && got == want {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("pod interface %s lacks address %s", p.IfName, want)
		}
	}
	return nil
}

func hasDefaultRoutes(link netlink.Link, p PodInterface) error {
	for _, gw := range p.Gateways {
		routes, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, family(gw)) })
		if err != nil {
			return fmt.Errorf("routes of %s: %w", p.IfName, err)
		}
		found := false
		for _, r := range routes {
			isDefault := r.Dst == nil || r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask)
			if isDefault && addrOf(r.Gw) == gw {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("pod interface %s has no default route via %s", p.IfName, gw)
		}
	}
	return nil
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

// DeletePodInterface deletes the host end, which takes the pod end with it. When the pod's
// namespace is gone the kernel has destroyed the pair already, and there is nothing to do.
func (linuxHost) DeletePodInterface(ctx context.Context, ref PodRef) error {
	link, err := linkByName(ref.HostIfName)
	if err != nil || link == nil {
		return err
	}
	if link.Type() != "veth" {
		return fmt.Errorf("%s is a %s, not a pod's veth: not deleting it", ref.HostIfName, link.Type())
	}
	if err := netlink.LinkDel(link); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil // gone meanwhile: its namespace was deleted
		}
		return fmt.Errorf("deleting %s: %w", ref.HostIfName, err)
	}
	return nil
}
