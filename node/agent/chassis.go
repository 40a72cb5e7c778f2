package agent

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// setupChassis makes the node an OVN chassis: br-int, the gateway bridge with the node's
// address, the settings ovn-controller reads, and the management port's OVS side. It returns
// what the Node's chassis annotation says and the node's address. Every step converges, so a
// restart changes nothing. subnet is the node's pod subnet where the host needs it for the
// uplink (Windows, hostnet.Uplink.PodSubnet), else zero.
func setupChassis(ctx context.Context, cfg Config, sw *ovs.Switch, host hostnet.Host, subnet netip.Prefix) (contract.NodeChassisInfo, hostnet.NodeAddress, error) {
	// fail_mode=secure: until ovn-controller has installed its flows br-int drops
	// everything instead of switching between pods. disable-in-band: ovn-controller talks
	// OpenFlow over a unix socket, so in-band control flows have nothing to protect.
	brInt := func() error {
		return sw.EnsureBridge(ctx, ovs.Bridge{
			Name: IntegrationBridge, DatapathType: cfg.DatapathType, FailMode: "secure",
			OtherConfig: map[string]string{"disable-in-band": "true"},
		})
	}
	// On Windows (a LateBinder host) there is no datapath, and OVS cannot add a bridge's
	// internal port, before SetupUplink has enabled the OVS extension on the vSwitch; a
	// bridge added earlier stays without its port until ovs-vswitchd restarts.
	_, late := host.(hostnet.LateBinder)
	if !late {
		if err := brInt(); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	var router netip.Addr
	if subnet.IsValid() {
		router = contract.RouterIP(subnet)
	}
	addr, err := host.SetupUplink(ctx, hostnet.Uplink{
		Iface: cfg.UplinkIface, Bridge: cfg.GatewayBridge, PreferIP: cfg.EncapIP,
		PodSubnet: subnet, PodSubnetRouter: router,
		Attach: func(ctx context.Context, mac net.HardwareAddr) error {
			// hwaddr pins the bridge's MAC to the uplink's: OVS would otherwise pick one
			// of its ports' MACs, which changes as ovn-controller adds patch ports.
			return sw.EnsureBridge(ctx, ovs.Bridge{
				Name: cfg.GatewayBridge, DatapathType: cfg.DatapathType,
				OtherConfig: map[string]string{"hwaddr": mac.String()},
				Uplinks:     []string{cfg.UplinkIface},
				Protocols:   gatewayProtocols,
			})
		},
		AttachHostPort: func(ctx context.Context, name string) error {
			_, err := sw.EnsurePort(ctx, cfg.GatewayBridge, ovs.Port{Name: name, Type: "internal"})
			return err
		},
	})
	if err != nil {
		return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
	}
	if late {
		if err := brInt(); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	if addr.SwitchID != "" {
		// After a reboot the OVS services started before the vSwitch existed, and
		// ovs-vswitchd on Windows tries again to add the ports it could not (the uplink,
		// the host vNIC, the bridges' own) only when its database changes; everything
		// above may have found its rows in place and written nothing.
		if _, err := sw.EnsureAttachedFor(ctx, addr.SwitchID); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	// The TLS files first: with ovn-remote ssl: and no SSL row, ovn-controller would try
	// (and fail) connections until the row came.
	if cfg.SBClientKey != "" {
		err := sw.EnsureSSL(ctx, ovs.SSL{PrivateKey: cfg.SBClientKey, Certificate: cfg.SBClientCert, CACert: cfg.SBCACert})
		if err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	if cfg.OpenFlowListen != "" {
		if err := ensureListeners(ctx, cfg, sw); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	encapIP := cfg.EncapIP
	if !encapIP.IsValid() {
		encapIP = addr.IP.Addr()
	}
	ch := ovs.Chassis{
		SystemID: cfg.NodeName, Hostname: contract.ChassisHostname(cfg.NodeName), SBRemote: cfg.SBAddress,
		EncapType: cfg.EncapType, EncapIP: encapIP.String(), DatapathType: cfg.DatapathType,
	}
	if cfg.UplinkIface != "" {
		ch.BridgeMappings = contract.PhysicalNetwork + ":" + cfg.GatewayBridge
	}
	if cfg.BridgeRemote {
		ch.BridgeRemote = bridgeRemote(cfg.OpenFlowListen, encapIP)
	}
	if cfg.SBProbeInterval > 0 {
		ch.RemoteProbe = strconv.FormatInt(cfg.SBProbeInterval.Milliseconds(), 10)
	}
	systemID, err := sw.EnsureChassis(ctx, ch)
	if err != nil {
		return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
	}
	if cfg.SBClientCert != "" {
		if err := checkChassisCert(cfg.SBClientCert, systemID); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	// The management port exists from the start, so ovn-controller can bind it as soon as
	// the master creates its logical port; its MAC and address wait for the node subnet.
	// Not on Windows (a LateBinder host): there OVS would bind the internal port to a stray
	// host vNIC of its own, since the HNS endpoint it stands for comes with the subnet.
	if !late {
		if _, err := sw.EnsurePort(ctx, IntegrationBridge, mgmtPort(cfg, nil)); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	info := contract.NodeChassisInfo{
		ChassisID: systemID, NodeIP: addr.IP.String(), GatewayMAC: addr.MAC.String(), OS: runtime.GOOS,
	}
	if addr.NextHop.IsValid() {
		info.NextHop = addr.NextHop.String()
	}
	return info, addr, info.Validate()
}

// gatewayProtocols are the OpenFlow versions the gateway bridge must allow: 1.4 for the
// agent's atomic flow syncs (1.3 would do, without atomicity), 1.0 for an operator's plain
// `ovs-ofctl dump-flows`. They are written rather than left to an empty column, whose
// meaning depends on the OVS release (older ones enable 1.0 to 1.3 only); versions an
// operator added are kept.
var gatewayProtocols = []string{"OpenFlow10", "OpenFlow13", "OpenFlow14"}

// mgmtPort is the management port's OVS side; mac is nil until the node subnet is known.
func mgmtPort(cfg Config, mac net.HardwareAddr) ovs.Port {
	p := ovs.Port{
		Name: contract.MgmtIfName(cfg.NodeName), Type: "internal", MTURequest: cfg.MTU,
		ExternalIDs: map[string]string{"iface-id": contract.ManagementPort(cfg.NodeName)},
	}
	if mac != nil {
		p.MAC = mac.String()
	}
	return p
}

// ensureListeners opens a remote chassis' listeners: its database at cfg.OVSDBListen (a
// Manager row) and br-int at cfg.OpenFlowListen (the bridge's one controller, passive). The
// SSL row goes: the remote ovn-controller reads the node's database and would apply that
// row's files (paths on this host) over its own; the listeners' TLS files are on the OVS
// daemons' command lines instead.
func ensureListeners(ctx context.Context, cfg Config, sw *ovs.Switch) error {
	if _, err := sw.RemoveSSL(ctx); err != nil {
		return err
	}
	if err := sw.EnsureManager(ctx, cfg.OVSDBListen, cfg.ListenProbeInterval); err != nil {
		return err
	}
	return sw.EnsureController(ctx, IntegrationBridge, cfg.OpenFlowListen, cfg.ListenProbeInterval)
}

// bridgeRemote is the OpenFlow listener listen ("pssl:6653[:IP]") as a client on another
// host dials it: ssl: (or tcp: for ptcp:) at the listener's IP, else at the node's address.
func bridgeRemote(listen string, node netip.Addr) string {
	scheme, rest, _ := strings.Cut(listen, ":")
	port, ip, _ := strings.Cut(rest, ":")
	ip = strings.Trim(ip, "[]") // OVS writes an IPv6 listener address in brackets
	if ip == "" {
		ip = node.String()
	}
	return strings.TrimPrefix(scheme, "p") + ":" + net.JoinHostPort(ip, port)
}
