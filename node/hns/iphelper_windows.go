package hns

// IPHelper over the IP Helper API (iphlpapi.dll): GetAdaptersAddresses to read, the
// *UnicastIpAddressEntry and *IpForwardEntry2 calls to write addresses and routes,
// SetIpInterfaceEntry for the MTU. DNS servers go where Windows keeps an interface's static
// servers (the Tcpip interface key's NameServer), which every supported build reads;
// SetInterfaceDnsSettings would need build 19041 or later.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// NewIPHelper returns the host's interfaces through the IP Helper API.
func NewIPHelper() IPHelper { return ipHelper{} }

type ipHelper struct{}

var (
	iphlpapi                         = windows.NewLazySystemDLL("iphlpapi.dll")
	procInitializeUnicastIPAddrEntry = iphlpapi.NewProc("InitializeUnicastIpAddressEntry")
	procCreateUnicastIPAddrEntry     = iphlpapi.NewProc("CreateUnicastIpAddressEntry")
	procDeleteUnicastIPAddrEntry     = iphlpapi.NewProc("DeleteUnicastIpAddressEntry")
	procInitializeIPForwardEntry     = iphlpapi.NewProc("InitializeIpForwardEntry")
	procCreateIPForwardEntry2        = iphlpapi.NewProc("CreateIpForwardEntry2")
	procDeleteIPForwardEntry2        = iphlpapi.NewProc("DeleteIpForwardEntry2")
	procGetIPForwardTable2           = iphlpapi.NewProc("GetIpForwardTable2")
	procFreeMibTable                 = iphlpapi.NewProc("FreeMibTable")
	procGetIPInterfaceEntry          = iphlpapi.NewProc("GetIpInterfaceEntry")
	procSetIPInterfaceEntry          = iphlpapi.NewProc("SetIpInterfaceEntry")
	procGetThreadCompartment         = iphlpapi.NewProc("GetCurrentThreadCompartmentId")
	procSetThreadCompartment         = iphlpapi.NewProc("SetCurrentThreadCompartmentId")
)

// mibIPForwardRow2 is MIB_IPFORWARD_ROW2 (netioapi.h); Go lays it out as C does (104
// bytes): SOCKADDR_INET is the 28-byte RawSockaddrInet6.
type mibIPForwardRow2 struct {
	InterfaceLuid        uint64
	InterfaceIndex       uint32
	DestinationPrefix    windows.RawSockaddrInet6
	DestinationLength    uint8
	NextHop              windows.RawSockaddrInet6
	SitePrefixLength     uint8
	ValidLifetime        uint32
	PreferredLifetime    uint32
	Metric               uint32
	Protocol             uint32
	Loopback             uint8
	AutoconfigureAddress uint8
	Publish              uint8
	Immortal             uint8
	Age                  uint32
	Origin               uint32
}

func winErr(r uintptr) error {
	if r != 0 {
		return windows.Errno(r)
	}
	return nil
}

func toSockaddr(a netip.Addr) windows.RawSockaddrInet6 {
	var sa windows.RawSockaddrInet6
	if a.Is4() {
		v4 := (*windows.RawSockaddrInet4)(unsafe.Pointer(&sa))
		v4.Family = windows.AF_INET
		v4.Addr = a.As4()
		return sa
	}
	sa.Family = windows.AF_INET6
	sa.Addr = a.As16()
	return sa
}

func fromSockaddr(sa *windows.RawSockaddrInet6) netip.Addr {
	switch sa.Family {
	case windows.AF_INET:
		return netip.AddrFrom4((*windows.RawSockaddrInet4)(unsafe.Pointer(sa)).Addr)
	case windows.AF_INET6:
		return netip.AddrFrom16(sa.Addr)
	}
	return netip.Addr{}
}

func addrOf(sa windows.SocketAddress) netip.Addr {
	a, _ := netip.AddrFromSlice(sa.IP())
	return a.Unmap()
}

// adapter finds the adapter whose alias is name in the agent's compartment (the host's).
func adapter(name string) (*windows.IpAdapterAddresses, error) {
	// GAA_FLAG_INCLUDE_ALL_INTERFACES: an adapter without IPv4 or IPv6 bound (a physical
	// adapter a vSwitch has taken) is otherwise left out of the list.
	return findAdapter(name, windows.GAA_FLAG_INCLUDE_GATEWAYS|windows.GAA_FLAG_INCLUDE_ALL_INTERFACES)
}

func (ipHelper) PodVNIC(_ context.Context, name string) (VNIC, error) {
	a, err := findAdapter(name, windows.GAA_FLAG_INCLUDE_ALL_COMPARTMENTS)
	if err != nil {
		return VNIC{}, err
	}
	return VNIC{Name: name, MTU: int(a.Mtu), Compartment: int(a.CompartmentId)}, nil
}

func (ipHelper) SetMTU(_ context.Context, name string, mtu int) error {
	// A pod's vNIC is in the pod's network compartment. The IP interface row is set from
	// inside that compartment: the calling thread switches to it and back (the host's
	// compartment cannot be assumed to reach another's rows by LUID).
	a, err := findAdapter(name, windows.GAA_FLAG_INCLUDE_ALL_COMPARTMENTS)
	if err != nil {
		return err
	}
	if int(a.Mtu) == mtu {
		return nil
	}
	return inCompartment(a.CompartmentId, func() error { return setMTU(a.Luid, mtu) })
}

// inCompartment runs fn on the calling goroutine's thread switched to network compartment
// id, and switches it back. A thread that cannot be switched back stays locked to the
// goroutine, so Go ends it with the goroutine instead of reusing it in the wrong compartment.
func inCompartment(id uint32, fn func() error) error {
	runtime.LockOSThread()
	prev := uint32(callProc(procGetThreadCompartment))
	if prev == id || id == 0 {
		defer runtime.UnlockOSThread()
		return fn()
	}
	if err := winErr(callProc(procSetThreadCompartment, uintptr(id))); err != nil {
		runtime.UnlockOSThread() // still in prev
		return fmt.Errorf("entering network compartment %d: %w", id, err)
	}
	err := fn()
	if rerr := winErr(callProc(procSetThreadCompartment, uintptr(prev))); rerr != nil {
		return errors.Join(err, fmt.Errorf("returning to network compartment %d: %w", prev, rerr))
	}
	runtime.UnlockOSThread()
	return err
}

func findAdapter(name string, flags uint32) (*windows.IpAdapterAddresses, error) {
	size := uint32(16 << 10)
	for {
		buf := make([]byte, size)
		first := (*windows.IpAdapterAddresses)(unsafe.Pointer(&buf[0]))
		err := windows.GetAdaptersAddresses(windows.AF_UNSPEC, flags, 0, first, &size)
		if err == windows.ERROR_BUFFER_OVERFLOW {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("GetAdaptersAddresses: %w", err)
		}
		for a := first; a != nil; a = a.Next {
			if windows.UTF16PtrToString(a.FriendlyName) == name {
				return a, nil
			}
		}
		return nil, fmt.Errorf("interface %q: %w", name, ErrNotFound)
	}
}

func (ipHelper) Interface(_ context.Context, name string) (Interface, error) {
	a, err := adapter(name)
	if err != nil {
		return Interface{}, err
	}
	out := Interface{Name: name, Index: int(a.IfIndex), MAC: net.HardwareAddr(slices.Clone(a.PhysicalAddress[:a.PhysicalAddressLength]))}
	out.MTU = int(a.Mtu)
	row := windows.MibIfRow2{InterfaceLuid: a.Luid}
	if err := windows.GetIfEntry2Ex(windows.MibIfEntryNormalWithoutStatistics, &row); err == nil {
		out.Physical = row.InterfaceAndOperStatusFlags&1 != 0 // HardwareInterface
	}
	for u := a.FirstUnicastAddress; u != nil; u = u.Next {
		if ip := addrOf(u.Address); ip.IsValid() && !ip.IsLinkLocalUnicast() {
			out.Addrs = append(out.Addrs, netip.PrefixFrom(ip, int(u.OnLinkPrefixLength)))
		}
	}
	for g := a.FirstGatewayAddress; g != nil; g = g.Next {
		if ip := addrOf(g.Address); ip.Is4() && !out.Gateway.IsValid() {
			out.Gateway = ip
		}
	}
	for d := a.FirstDnsServerAddress; d != nil; d = d.Next {
		if ip := addrOf(d.Address); ip.IsValid() && !ip.IsLinkLocalUnicast() {
			out.DNS = append(out.DNS, ip)
		}
	}
	routes, err := routesOf(a.Luid)
	if err != nil {
		return Interface{}, err
	}
	for _, r := range routes {
		if r.Dst.Bits() != 0 {
			out.Routes = append(out.Routes, r)
		}
	}
	return out, nil
}

// routesOf returns the interface's routes through a next hop (not the on-link ones).
func routesOf(luid uint64) ([]Route, error) {
	var table unsafe.Pointer
	if err := winErr(callProc(procGetIPForwardTable2, windows.AF_UNSPEC, uintptr(unsafe.Pointer(&table)))); err != nil {
		return nil, fmt.Errorf("GetIpForwardTable2: %w", err)
	}
	defer callProc(procFreeMibTable, uintptr(table))
	n := *(*uint32)(table)
	// MIB_IPFORWARD_TABLE2: ULONG NumEntries, then the rows at the rows' alignment (8).
	rows := unsafe.Slice((*mibIPForwardRow2)(unsafe.Add(table, 8)), n)
	var out []Route
	for i := range rows {
		r := &rows[i]
		hop := fromSockaddr(&r.NextHop)
		if r.InterfaceLuid != luid || !hop.IsValid() || hop.IsUnspecified() {
			continue
		}
		out = append(out, Route{Dst: netip.PrefixFrom(fromSockaddr(&r.DestinationPrefix), int(r.DestinationLength)), NextHop: hop})
	}
	return out, nil
}

func callProc(p *windows.LazyProc, args ...uintptr) uintptr {
	r, _, _ := p.Call(args...)
	return r
}

func (h ipHelper) Configure(ctx context.Context, name string, c IPConfig) error {
	a, err := adapter(name)
	if err != nil {
		return err
	}
	have, err := h.Interface(ctx, name)
	if err != nil {
		return err
	}
	for _, p := range have.Addrs {
		if !slices.Contains(c.Addrs, p) {
			if err := unicast(procDeleteUnicastIPAddrEntry, a.Luid, p); err != nil {
				return fmt.Errorf("removing %s from %q: %w", p, name, err)
			}
		}
	}
	for _, p := range c.Addrs {
		if !slices.Contains(have.Addrs, p) {
			if err := unicast(procCreateUnicastIPAddrEntry, a.Luid, p); err != nil {
				return fmt.Errorf("adding %s to %q: %w", p, name, err)
			}
		}
	}
	want := slices.Clone(c.Routes)
	if c.Gateway.IsValid() {
		want = append(want, Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), NextHop: c.Gateway})
	}
	current, err := routesOf(a.Luid)
	if err != nil {
		return err
	}
	for _, r := range current {
		if !slices.Contains(want, r) {
			if err := route(procDeleteIPForwardEntry2, a.Luid, r); err != nil {
				return fmt.Errorf("removing route %s via %s from %q: %w", r.Dst, r.NextHop, name, err)
			}
		}
	}
	for _, r := range want {
		if !slices.Contains(current, r) {
			if err := route(procCreateIPForwardEntry2, a.Luid, r); err != nil {
				return fmt.Errorf("adding route %s via %s to %q: %w", r.Dst, r.NextHop, name, err)
			}
		}
	}
	if err := setDNS(windows.BytePtrToString(a.AdapterName), c.DNS); err != nil {
		return fmt.Errorf("DNS servers of %q: %w", name, err)
	}
	if c.MTU > 0 && int(a.Mtu) != c.MTU {
		if err := setMTU(a.Luid, c.MTU); err != nil {
			return fmt.Errorf("MTU of %q: %w", name, err)
		}
	}
	return nil
}

func unicast(proc *windows.LazyProc, luid uint64, p netip.Prefix) error {
	var row windows.MibUnicastIpAddressRow
	callProc(procInitializeUnicastIPAddrEntry, uintptr(unsafe.Pointer(&row)))
	row.InterfaceLuid = luid
	row.Address = toSockaddr(p.Addr())
	row.OnLinkPrefixLength = uint8(p.Bits())
	row.DadState = 4 // IpDadStatePreferred: usable at once
	return winErr(callProc(proc, uintptr(unsafe.Pointer(&row))))
}

func route(proc *windows.LazyProc, luid uint64, r Route) error {
	var row mibIPForwardRow2
	callProc(procInitializeIPForwardEntry, uintptr(unsafe.Pointer(&row)))
	row.InterfaceLuid = luid
	row.DestinationPrefix = toSockaddr(r.Dst.Addr())
	row.DestinationLength = uint8(r.Dst.Bits())
	row.NextHop = toSockaddr(r.NextHop)
	row.Protocol = 3 // MIB_IPPROTO_NETMGMT: a static route
	return winErr(callProc(proc, uintptr(unsafe.Pointer(&row))))
}

func setMTU(luid uint64, mtu int) error {
	var row windows.MibIpInterfaceRow
	row.Family = windows.AF_INET
	row.InterfaceLuid = luid
	if err := winErr(callProc(procGetIPInterfaceEntry, uintptr(unsafe.Pointer(&row)))); err != nil {
		return err
	}
	row.NlMtu = uint32(mtu)
	row.SitePrefixLength = 0 // SetIpInterfaceEntry rejects IPv4 rows with a site prefix
	return winErr(callProc(procSetIPInterfaceEntry, uintptr(unsafe.Pointer(&row))))
}

func (ipHelper) SetForwarding(_ context.Context, name string) error {
	a, err := adapter(name)
	if err != nil {
		return err
	}
	var row windows.MibIpInterfaceRow
	row.Family = windows.AF_INET
	row.InterfaceLuid = a.Luid
	if err := winErr(callProc(procGetIPInterfaceEntry, uintptr(unsafe.Pointer(&row)))); err != nil {
		return fmt.Errorf("interface %q: %w", name, err)
	}
	if row.ForwardingEnabled == 1 && row.WeakHostSend == 1 && row.WeakHostReceive == 1 {
		return nil
	}
	row.ForwardingEnabled, row.WeakHostSend, row.WeakHostReceive = 1, 1, 1
	row.SitePrefixLength = 0 // SetIpInterfaceEntry rejects IPv4 rows with a site prefix
	if err := winErr(callProc(procSetIPInterfaceEntry, uintptr(unsafe.Pointer(&row)))); err != nil {
		return fmt.Errorf("enabling forwarding on %q: %w", name, err)
	}
	return nil
}

// dnsInterfaceSettings is DNS_INTERFACE_SETTINGS (netioapi.h), version 1.
type dnsInterfaceSettings struct {
	Version             uint32
	Flags               uint64
	Domain              *uint16
	NameServer          *uint16
	SearchList          *uint16
	RegistrationEnabled uint32
	RegisterAdapterName uint32
	EnableLLMNR         uint32
	QueryAdapterName    uint32
	ProfileNameServer   *uint16
}

var procSetInterfaceDNSSettings = iphlpapi.NewProc("SetInterfaceDnsSettings")

// setDNS sets the interface's static IPv4 DNS servers. SetInterfaceDnsSettings (build
// 19041 and later: Windows Server 2022) writes them and tells the DNS client at once;
// before it, they go where Windows keeps them (the Tcpip interface key's NameServer),
// which the DNS client reads at its next adapter change, not now.
func setDNS(guid string, servers []netip.Addr) error {
	var v4 []string
	for _, s := range servers {
		if s.Is4() {
			v4 = append(v4, s.String())
		}
	}
	if procSetInterfaceDNSSettings.Find() == nil {
		id, err := windows.GUIDFromString(guid)
		if err != nil {
			return err
		}
		list, err := windows.UTF16PtrFromString(strings.Join(v4, ","))
		if err != nil {
			return err
		}
		settings := dnsInterfaceSettings{Version: 1, Flags: 0x2 /* DNS_SETTING_NAMESERVER */, NameServer: list}
		// The GUID is passed by value; the x64 calling convention passes a 16-byte
		// structure as a pointer to it.
		return winErr(callProc(procSetInterfaceDNSSettings, uintptr(unsafe.Pointer(&id)), uintptr(unsafe.Pointer(&settings))))
	}
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Services\Tcpip\Parameters\Interfaces\`+guid, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	want := strings.Join(v4, ",")
	if cur, _, err := k.GetStringValue("NameServer"); err == nil && cur == want {
		return nil
	}
	return k.SetStringValue("NameServer", want)
}
