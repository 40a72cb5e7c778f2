package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/node/agent"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
)

// Config is the node agent's validated configuration.
type Config = agent.Config

func flags() []cli.Flag {
	host, _ := os.Hostname()
	return []cli.Flag{
		cliapp.String("node-name", host, "this node's name in Kubernetes"),
		cliapp.String("kubeconfig", "", "kubeconfig file; empty means in-cluster configuration"),
		cliapp.String("sb-address", "", "OVN Southbound remotes for ovn-controller, comma separated (ssl:IP:PORT, tcp:IP:PORT)"),
		cliapp.String("sb-client-cert", "", "ovn-controller's certificate for ssl: SB remotes, its common name the node name; written with the two below into the local Open_vSwitch database's SSL row, which ovn-controller reads when started without -p/-c/-C"),
		cliapp.String("sb-client-key", "", "ovn-controller's private key for ssl: SB remotes"),
		cliapp.String("sb-ca-cert", "", "CA certificate ovn-controller checks the SB servers against"),
		cliapp.String("ovs-address", contract.OVSAddress, "local Open_vSwitch database"),
		cliapp.String("ovsdb-listen", "", "remote chassis (docs/remote-chassis.md): where the database listens for the ovn-controller on another host, written as a manager target: pssl:PORT[:IP] (ptcp: only with --listen-plaintext); TLS files on ovsdb-server's command line. Goes with --openflow-listen; empty: a local ovn-controller"),
		cliapp.String("openflow-listen", "", "remote chassis: br-int's passive controller target for that ovn-controller's OpenFlow: pssl:PORT[:IP] (ptcp: only with --listen-plaintext); TLS files on ovs-vswitchd's command line"),
		cliapp.Bool("ovn-bridge-remote", false, "remote chassis: also write external_ids:ovn-bridge-remote (--openflow-listen as a client dials it, at the node's address), for an ovn-controller of OVN 24.09 or later, which then needs no OpenFlow relay (chassis-relay --openflow-port 0)"),
		cliapp.Duration("listen-probe-interval", 60*time.Second, "remote chassis: the inactivity probe of both listeners (their Manager and Controller rows): how long the remote ovn-controller's connection may be silent before the node probes it, and how long it waits for the answer before it drops the connection; OVS's own 5 s drops a busy ovn-controller, which then reinstalls every flow (0 leaves OVS's default)"),
		cliapp.Bool("listen-plaintext", false, "allow ptcp: in --ovsdb-listen and --openflow-listen: the node's database and br-int open to anyone on the network"),
		cliapp.Duration("sb-probe-interval", 60*time.Second, "ovn-controller's SB inactivity probe (external_ids:ovn-remote-probe-interval): how long its SB connection may be silent before it probes, and how long it waits for the answer before it reconnects and recomputes; OVN's own 5 s drops busy nodes (0 leaves OVN's default)"),
		cliapp.String("encap-type", "geneve", "tunnel encapsulation: geneve, or stt (needs an OVS build up to 3.5)"),
		cliapp.String("encap-ip", "", "tunnel endpoint address; empty means the node's InternalIP"),
		cliapp.Int("mtu", 1400, "pod interface MTU (the underlay's minus the tunnel overhead)"),
		cliapp.String("datapath-type", "system", "datapath of the node's bridges: system (kernel module) or netdev (userspace)"),
		cliapp.String("uplink-interface", "", "interface to the physical network, moved into the gateway bridge"),
		cliapp.String("gateway-bridge", "br-phy", "the bridge that holds the uplink and takes over the node's address"),
		cliapp.String("ovs-rundir", "", "ovs-vswitchd's run directory, where the gateway bridge's OpenFlow socket <bridge>.mgmt is; empty: the directory of a unix: --ovs-address, else "+contract.OVSRunDir),
		cliapp.Duration("gateway-resync", gateway.DefaultResync, "how often the gateway bridge's flows are read back and restored"),
		cliapp.Bool("local-nodeports", true, "rewrite the host's own connections to its NodePorts to the Service's ClusterIP (Linux: nf_tables table ip ovnt-local-nodeport), and deliver the connections OVN sends to the management address as to the node IP (table ip ovnt-mgmt-redirect: host-network endpoints); not implemented on Windows"),
		cliapp.String(contract.FlagClusterCIDR, "10.244.0.0/16", "pod address ranges, comma separated, routed from the node through the management port (what ovnt-master is given)"),
		cliapp.String(contract.FlagServiceCIDR, "10.96.0.0/16", "service address ranges, comma separated, routed from the node through the management port"),
		cliapp.String(contract.FlagJoinSubnet, contract.DefaultJoinSubnet, "the master's join subnet: no Service may claim an external IP in it (what ovnt-master is given)"),
		cliapp.String(contract.FlagAllowedExternalIPCIDRs, "", "ranges Services may claim as externalIPs or LoadBalancer ingress IPs, comma separated; empty allows none (what ovnt-master is given)"),
		cliapp.Int(contract.FlagMaxServiceFrontends, svcmodel.DefaultMaxServiceFrontends, "most frontends (ports times cluster, external and ingress IPs and node port) of one Service; a larger Service is not implemented, with an Event (0: no limit; what ovnt-master is given)"),
		cliapp.Int(contract.FlagMaxNamespaceFrontends, svcmodel.DefaultMaxNamespaceFrontends, "most frontends of all the Services of one namespace, oldest first; a Service past it is not implemented, with an Event (0: no limit; what ovnt-master is given)"),
		cliapp.Int(contract.FlagMaxNamespaceEntryPoints, svcmodel.DefaultMaxNamespaceEntryPoints, "most gateway entry points (ports times external and ingress IPs, and node ports) of all the Services of one namespace, oldest first; a Service past it gets none (0: no limit; what ovnt-master is given)"),
		cliapp.String("cni-socket", contract.CNISocket, "where the CNI plugin reaches this agent"),
		cliapp.String("cni-bin-dir", contract.CNIBinDir, "where the CNI plugin binary is installed"),
		cliapp.String("cni-conf-dir", contract.CNIConfDir, "where the CNI network configuration is written"),
		cliapp.String("cni-plugin", "", "the ovnt-cni binary to install; empty means the one beside this binary"),
		cliapp.Duration("pod-annotation-timeout", 30*time.Second, "how long CNI ADD waits for the master to annotate the pod"),
		cliapp.Duration("port-install-timeout", time.Minute, "how long CNI ADD waits for ovn-controller to install the pod's port"),
		cliapp.Duration("leak-collect-interval", 5*time.Minute, "how often the agent removes the ports (and HNS endpoints) of pods that are gone, which runtimes that never call CNI GC leave behind; removed after two passes in a row find them"),
		cliapp.String("health-address", "127.0.0.1:9477", "host:port of /metrics (Prometheus), /healthz and /readyz; empty turns them off. The default is reachable only from the node itself (the agent runs in the host network)"),
		cliapp.Int("log-level", 0, "log verbosity, as ovnt-master's: 0 start-up, warnings and errors; 2 every change made (each CNI call); 4 every sync"),
	}
}

// configFrom reads and validates the flags.
func configFrom(c *cli.Context) (Config, error) {
	cfg := Config{
		NodeName:            c.String("node-name"),
		Kubeconfig:          c.String("kubeconfig"),
		SBAddress:           c.String("sb-address"),
		SBClientCert:        c.String("sb-client-cert"),
		SBClientKey:         c.String("sb-client-key"),
		SBCACert:            c.String("sb-ca-cert"),
		OVSAddress:          c.String("ovs-address"),
		OVSDBListen:         c.String("ovsdb-listen"),
		OpenFlowListen:      c.String("openflow-listen"),
		ListenProbeInterval: c.Duration("listen-probe-interval"),
		BridgeRemote:        c.Bool("ovn-bridge-remote"),
		EncapType:           c.String("encap-type"),
		SBProbeInterval:     c.Duration("sb-probe-interval"),
		MTU:                 c.Int("mtu"),
		DatapathType:        c.String("datapath-type"),
		UplinkIface:         c.String("uplink-interface"),
		GatewayBridge:       c.String("gateway-bridge"),
		OVSRunDir:           ovsRunDir(c.String("ovs-rundir"), c.String("ovs-address")),
		GatewayResync:       c.Duration("gateway-resync"),
		LocalNodePorts:      c.Bool("local-nodeports"),
		CNISocket:           c.String("cni-socket"),
		CNIBinDir:           c.String("cni-bin-dir"),
		CNIConfDir:          c.String("cni-conf-dir"),
		CNIPlugin:           c.String("cni-plugin"),
		AnnotationTTL:       c.Duration("pod-annotation-timeout"),
		PortInstallTimeout:  c.Duration("port-install-timeout"),
		LeakCollect:         c.Duration("leak-collect-interval"),
		HealthAddress:       c.String("health-address"),
		ServiceLimits: svcmodel.Limits{PerService: c.Int(contract.FlagMaxServiceFrontends),
			PerNamespace:            c.Int(contract.FlagMaxNamespaceFrontends),
			PerNamespaceEntryPoints: c.Int(contract.FlagMaxNamespaceEntryPoints)},
	}
	if s := c.String("encap-ip"); s != "" {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Config{}, fmt.Errorf("--encap-ip %q: %w", s, err)
		}
		cfg.EncapIP = ip
	}
	nets, err := contract.ParseClusterNetworks(c.String(contract.FlagClusterCIDR), c.String(contract.FlagServiceCIDR))
	if err != nil {
		return Config{}, err
	}
	cfg.ClusterCIDRs, cfg.ServiceCIDRs = nets.ClusterCIDRs, nets.ServiceCIDRs
	if cfg.JoinSubnet, err = contract.ParseJoinSubnet(c.String(contract.FlagJoinSubnet)); err != nil {
		return Config{}, err
	}
	if cfg.AllowedExternalIPs, err = contract.ParseExternalIPCIDRs(c.String(contract.FlagAllowedExternalIPCIDRs)); err != nil {
		return Config{}, err
	}
	if err := validateListeners(cfg, c.Bool("listen-plaintext")); err != nil {
		return Config{}, err
	}
	return cfg, validate(cfg)
}

// validateListeners checks a remote chassis' listener targets: both or neither, passive
// TLS unless the operator allowed plain TCP, and no SB identity on the node (the remote
// controller holds it).
func validateListeners(c Config, plaintext bool) error {
	if (c.OVSDBListen == "") != (c.OpenFlowListen == "") {
		return fmt.Errorf("--ovsdb-listen and --openflow-listen go together")
	}
	if c.OVSDBListen == "" {
		if c.BridgeRemote {
			return fmt.Errorf("--ovn-bridge-remote needs --openflow-listen")
		}
		return nil
	}
	if c.SBClientCert != "" {
		return fmt.Errorf("--sb-client-cert with --ovsdb-listen: a remote chassis' SB identity belongs to its remote ovn-controller, and an SSL row here would override that controller's own files")
	}
	for flag, t := range map[string]string{"--ovsdb-listen": c.OVSDBListen, "--openflow-listen": c.OpenFlowListen} {
		scheme, rest, _ := strings.Cut(t, ":")
		port, _, _ := strings.Cut(rest, ":")
		if _, err := strconv.ParseUint(port, 10, 16); err != nil || (scheme != "pssl" && scheme != "ptcp") {
			return fmt.Errorf("%s %q: want pssl:PORT[:IP]", flag, t)
		}
		if scheme == "ptcp" && !plaintext {
			return fmt.Errorf("%s %q is plain TCP: use pssl:, or say --listen-plaintext", flag, t)
		}
	}
	return nil
}

// ovsRunDir is where ovs-vswitchd's sockets are: as given, else beside a unix: database
// socket (OVS keeps db.sock and the bridges' <bridge>.mgmt in its one run directory), else
// the platform's default.
func ovsRunDir(flag, ovsAddress string) string {
	if flag != "" {
		return flag
	}
	if path, ok := strings.CutPrefix(ovsAddress, "unix:"); ok && filepath.IsAbs(path) {
		return filepath.Dir(path)
	}
	return contract.OVSRunDir
}

func validate(c Config) error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("--node-name is empty")
	case c.SBProbeInterval < 0 || (c.SBProbeInterval > 0 && c.SBProbeInterval < time.Second):
		return fmt.Errorf("--sb-probe-interval %s: must be 0 or at least 1s", c.SBProbeInterval)
	case c.EncapType != "geneve" && c.EncapType != "stt":
		return fmt.Errorf("--encap-type %q: must be geneve or stt", c.EncapType)
	case c.MTU < 576 || c.MTU > 9000:
		return fmt.Errorf("--mtu %d: must be between 576 and 9000", c.MTU)
	case c.DatapathType != "system" && c.DatapathType != "netdev":
		return fmt.Errorf("--datapath-type %q: must be system or netdev", c.DatapathType)
	case c.UplinkIface != "" && c.GatewayBridge == "":
		return fmt.Errorf("--gateway-bridge is empty but --uplink-interface is set")
	case c.ServiceLimits.PerService < 0 || c.ServiceLimits.PerNamespace < 0 || c.ServiceLimits.PerNamespaceEntryPoints < 0:
		return fmt.Errorf("--%s, --%s and --%s must not be negative", contract.FlagMaxServiceFrontends, contract.FlagMaxNamespaceFrontends, contract.FlagMaxNamespaceEntryPoints)
	case c.GatewayResync <= 0:
		return fmt.Errorf("--gateway-resync %s: must be positive", c.GatewayResync)
	case c.AnnotationTTL <= 0:
		return fmt.Errorf("--pod-annotation-timeout %s: must be positive", c.AnnotationTTL)
	case c.PortInstallTimeout <= 0:
		return fmt.Errorf("--port-install-timeout %s: must be positive", c.PortInstallTimeout)
	case c.LeakCollect <= 0:
		return fmt.Errorf("--leak-collect-interval %s: must be positive", c.LeakCollect)
	case c.CNISocket == "":
		return fmt.Errorf("--cni-socket is empty")
	case (c.SBClientCert == "") != (c.SBClientKey == "") || (c.SBClientCert == "") != (c.SBCACert == ""):
		return fmt.Errorf("--sb-client-cert, --sb-client-key and --sb-ca-cert go together")
	}
	return nil
}
