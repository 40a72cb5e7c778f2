package cniserver

import (
	"encoding/json"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
)

// result is the ADD result in cniVersion: the host and pod interfaces, the pod's addresses
// with their gateways, and its routes. DNS stays empty: kubelet configures the pod's
// resolver itself.
func result(cniVersion string, p hostnet.PodInterface, att hostnet.Attached) ([]byte, error) {
	podIndex := 1
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: att.HostIfName, Mac: att.HostMAC.String()},
			{Name: p.IfName, Mac: p.MAC.String(), Mtu: p.MTU, Sandbox: p.Netns},
		},
	}
	for _, ip := range p.IPs {
		c := &current.IPConfig{Interface: &podIndex, Address: net.IPNet{IP: ip.Addr().AsSlice(), Mask: net.CIDRMask(ip.Bits(), ip.Addr().BitLen())}}
		for _, gw := range p.Gateways {
			if ip.Masked().Contains(gw) {
				c.Gateway = gw.AsSlice()
			}
		}
		r.IPs = append(r.IPs, c)
	}
	for _, gw := range p.Gateways {
		dst := net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		if gw.Is6() {
			dst = net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		r.Routes = append(r.Routes, &types.Route{Dst: dst, GW: gw.AsSlice()})
	}
	for _, rt := range p.Routes {
		r.Routes = append(r.Routes, &types.Route{
			Dst: net.IPNet{IP: rt.Dest.Addr().AsSlice(), Mask: net.CIDRMask(rt.Dest.Bits(), rt.Dest.Addr().BitLen())},
			GW:  rt.NextHop.AsSlice(),
		})
	}
	converted, err := r.GetAsVersion(cniVersion)
	if err != nil {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, "converting the result", err.Error())
	}
	return json.Marshal(converted)
}
