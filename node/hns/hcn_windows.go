package hns

// The one-to-one layer over hcn: each method is one or two hcn calls and a conversion, and
// nothing else, so that what is worth testing lives in the OS-neutral code above it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/Microsoft/hcsshim/hcn"
	"golang.org/x/sys/windows"
)

// NewHCN returns HNS through the hcn (v2) API.
func NewHCN() HNS { return hcnHNS{} }

type hcnHNS struct{}

// call runs f, which hcn gives no way to cancel, and returns early with ctx's error if ctx
// ends first (f then finishes, or hangs, on its own goroutine): HNS calls can hang.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func notFound(err error) bool {
	var (
		n  hcn.NetworkNotFoundError
		e  hcn.EndpointNotFoundError
		ns hcn.NamespaceNotFoundError
	)
	return errors.As(err, &n) || errors.As(err, &e) || errors.As(err, &ns) || hcn.IsElementNotFoundError(err)
}

func wrapNotFound(err error) error {
	if err != nil && notFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

func fromHCNNetwork(n *hcn.HostComputeNetwork) Network {
	out := Network{ID: n.Id, Name: n.Name, Type: string(n.Type)}
	for _, ipam := range n.Ipams {
		for _, sub := range ipam.Subnets {
			p, err := netip.ParsePrefix(sub.IpAddressPrefix)
			if err != nil {
				continue
			}
			s := Subnet{Prefix: p}
			for _, r := range sub.Routes {
				if r.DestinationPrefix == "0.0.0.0/0" || r.DestinationPrefix == "::/0" {
					s.Gateway, _ = netip.ParseAddr(r.NextHop)
				}
			}
			out.Subnets = append(out.Subnets, s)
		}
	}
	// The adapter and the extensions come from v1 (withV1).
	return out
}

// withV1 completes n, read through v2, with the adapter and the extension state as v1
// reports them (v1.go says why).
func withV1(n Network) (Network, error) {
	var v v1Network
	if err := hnsV1("GET", "/networks/"+n.ID, "", &v); err != nil {
		return Network{}, fmt.Errorf("reading network %q back through HNS v1: %w", n.Name, err)
	}
	applyV1(&n, v)
	return n, nil
}

func (hcnHNS) Network(ctx context.Context, name string) (Network, error) {
	return call(ctx, func() (Network, error) {
		n, err := hcn.GetNetworkByName(name)
		if err != nil {
			return Network{}, wrapNotFound(err)
		}
		return withV1(fromHCNNetwork(n))
	})
}

func (hcnHNS) CreateTransparentNetwork(ctx context.Context, name, adapter string, subnets []Subnet) (Network, error) {
	settings, err := json.Marshal(hcn.NetAdapterNameNetworkPolicySetting{NetworkAdapterName: adapter})
	if err != nil {
		return Network{}, err
	}
	req := &hcn.HostComputeNetwork{
		Name: name, Type: hcn.Transparent, SchemaVersion: hcn.V2SchemaVersion(),
		Policies: []hcn.NetworkPolicy{{Type: hcn.NetAdapterName, Settings: settings}},
	}
	if len(subnets) > 0 {
		ipam := hcn.Ipam{Type: "Static"}
		for _, s := range subnets {
			sub := hcn.Subnet{IpAddressPrefix: s.Prefix.Masked().String()}
			if s.Gateway.IsValid() {
				dst := "0.0.0.0/0"
				if s.Gateway.Is6() {
					dst = "::/0"
				}
				sub.Routes = []hcn.Route{{NextHop: s.Gateway.String(), DestinationPrefix: dst}}
			}
			ipam.Subnets = append(ipam.Subnets, sub)
		}
		req.Ipams = []hcn.Ipam{ipam}
	}
	return call(ctx, func() (Network, error) {
		n, err := req.Create()
		if err != nil {
			return Network{}, err
		}
		return withV1(fromHCNNetwork(n))
	})
}

// EnableExtension enables it the way Antrea's agent does, through a v1 POST of the
// network's Extensions (the semantics of Enable-VMSwitchExtension), and reads the network
// back: HNS can accept the request and leave the extension disabled (another forwarding
// extension on the switch, or OVS enabled on another switch).
func (hcnHNS) EnableExtension(ctx context.Context, networkID, id string) error {
	_, err := call(ctx, func() (struct{}, error) {
		if err := hnsV1("POST", "/networks/"+networkID, v1EnableExtension(id), nil); err != nil {
			return struct{}{}, fmt.Errorf("enabling extension %s: %w", id, err)
		}
		var v v1Network
		if err := hnsV1("GET", "/networks/"+networkID, "", &v); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, checkEnabled(v, id)
	})
	return err
}

var procHNSCall = windows.NewLazySystemDLL("vmcompute.dll").NewProc("HNSCall")

// hnsV1 makes one HNS v1 call (vmcompute.dll HNSCall) and decodes its answer into out.
func hnsV1(method, path, body string, out any) error {
	if err := procHNSCall.Find(); err != nil {
		return fmt.Errorf("HNS v1: %w", err)
	}
	m, err := windows.UTF16PtrFromString(method)
	if err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	b, err := windows.UTF16PtrFromString(body)
	if err != nil {
		return err
	}
	var answer *uint16
	r, _, _ := procHNSCall.Call(uintptr(unsafe.Pointer(m)), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(&answer)))
	var text string
	if answer != nil {
		text = windows.UTF16PtrToString(answer)
		windows.CoTaskMemFree(unsafe.Pointer(answer))
	}
	if int32(r) < 0 {
		return fmt.Errorf("HNS v1 %s %s: HRESULT 0x%08X", method, path, uint32(r))
	}
	return decodeV1([]byte(text), out)
}

func (hcnHNS) DeleteNetwork(ctx context.Context, id string) error {
	_, err := call(ctx, func() (struct{}, error) {
		n, err := hcn.GetNetworkByID(id)
		if notFound(err) {
			return struct{}{}, nil
		}
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, n.Delete()
	})
	return err
}

func fromHCNEndpoint(e *hcn.HostComputeEndpoint) Endpoint {
	out := Endpoint{ID: e.Id, Name: e.Name, NetworkID: e.HostComputeNetwork, Namespace: e.HostComputeNamespace,
		DNS: DNS{Search: e.Dns.Search}}
	// HNS writes MACs as 00-15-5D-..., which net.ParseMAC reads.
	out.MAC, _ = net.ParseMAC(e.MacAddress)
	for _, c := range e.IpConfigurations {
		if a, err := netip.ParseAddr(c.IpAddress); err == nil {
			out.IPs = append(out.IPs, netip.PrefixFrom(a, int(c.PrefixLength)))
		}
	}
	for _, r := range e.Routes {
		hop, err := netip.ParseAddr(r.NextHop)
		if err != nil {
			continue
		}
		if r.DestinationPrefix == "0.0.0.0/0" || r.DestinationPrefix == "::/0" {
			if !out.Gateway.IsValid() {
				out.Gateway = hop
			}
			continue
		}
		if dst, err := netip.ParsePrefix(r.DestinationPrefix); err == nil {
			out.Routes = append(out.Routes, Route{Dst: dst, NextHop: hop})
		}
	}
	for _, s := range e.Dns.ServerList {
		if a, err := netip.ParseAddr(s); err == nil {
			out.DNS.Servers = append(out.DNS.Servers, a)
		}
	}
	return out
}

func (hcnHNS) CreateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error) {
	req := &hcn.HostComputeEndpoint{
		Name: e.Name, HostComputeNetwork: e.NetworkID, SchemaVersion: hcn.V2SchemaVersion(),
		MacAddress: strings.ReplaceAll(strings.ToUpper(e.MAC.String()), ":", "-"),
		Dns:        hcn.Dns{Search: e.DNS.Search},
	}
	for _, ip := range e.IPs {
		req.IpConfigurations = append(req.IpConfigurations, hcn.IpConfig{IpAddress: ip.Addr().String(), PrefixLength: uint8(ip.Bits())})
	}
	for _, s := range e.DNS.Servers {
		req.Dns.ServerList = append(req.Dns.ServerList, s.String())
	}
	if e.Gateway.IsValid() {
		dst := "0.0.0.0/0"
		if e.Gateway.Is6() {
			dst = "::/0"
		}
		req.Routes = []hcn.Route{{NextHop: e.Gateway.String(), DestinationPrefix: dst}}
	}
	for _, r := range e.Routes {
		req.Routes = append(req.Routes, hcn.Route{NextHop: r.NextHop.String(), DestinationPrefix: r.Dst.String()})
	}
	out, err := call(ctx, req.Create)
	if err != nil {
		if hcn.IsPortAlreadyExistsError(err) {
			return Endpoint{}, fmt.Errorf("%w: %v", ErrExists, err)
		}
		return Endpoint{}, wrapNotFound(err)
	}
	return fromHCNEndpoint(out), nil
}

func (hcnHNS) Endpoint(ctx context.Context, name string) (Endpoint, error) {
	e, err := call(ctx, func() (*hcn.HostComputeEndpoint, error) { return hcn.GetEndpointByName(name) })
	if err != nil {
		return Endpoint{}, wrapNotFound(err)
	}
	return fromHCNEndpoint(e), nil
}

func (hcnHNS) ListEndpoints(ctx context.Context, networkID string) ([]Endpoint, error) {
	eps, err := call(ctx, func() ([]hcn.HostComputeEndpoint, error) { return hcn.ListEndpointsOfNetwork(networkID) })
	if err != nil {
		return nil, wrapNotFound(err)
	}
	out := make([]Endpoint, 0, len(eps))
	for i := range eps {
		out = append(out, fromHCNEndpoint(&eps[i]))
	}
	return out, nil
}

func (hcnHNS) DeleteEndpoint(ctx context.Context, id string) error {
	_, err := call(ctx, func() (struct{}, error) {
		e, err := hcn.GetEndpointByID(id)
		if notFound(err) {
			return struct{}{}, nil
		}
		if err != nil {
			return struct{}{}, err
		}
		if err := e.Delete(); err != nil && !notFound(err) {
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
	return err
}

func (hcnHNS) Attach(ctx context.Context, namespaceID, endpointID string) error {
	_, err := call(ctx, func() (struct{}, error) {
		ids, err := hcn.GetNamespaceEndpointIds(namespaceID)
		if err != nil {
			return struct{}{}, wrapNotFound(err)
		}
		for _, id := range ids {
			if strings.EqualFold(id, endpointID) {
				return struct{}{}, nil
			}
		}
		return struct{}{}, wrapNotFound(hcn.AddNamespaceEndpoint(namespaceID, endpointID))
	})
	return err
}

func (hcnHNS) Detach(ctx context.Context, namespaceID, endpointID string) error {
	_, err := call(ctx, func() (struct{}, error) {
		err := hcn.RemoveNamespaceEndpoint(namespaceID, endpointID)
		if err != nil && notFound(err) {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return err
}

func (hcnHNS) HostNamespace(ctx context.Context) (string, error) {
	nss, err := call(ctx, hcn.ListNamespaces)
	if err != nil {
		return "", err
	}
	for _, ns := range nss {
		if ns.Type == hcn.NamespaceTypeHostDefault {
			return ns.Id, nil
		}
	}
	return "", fmt.Errorf("host default namespace: %w", ErrNotFound)
}

func (hcnHNS) CreateHostNamespace(ctx context.Context) (string, error) {
	req := &hcn.HostComputeNamespace{Type: hcn.NamespaceTypeHostDefault, SchemaVersion: hcn.V2SchemaVersion()}
	ns, err := call(ctx, req.Create)
	if err != nil {
		return "", err
	}
	return ns.Id, nil
}
