package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
)

// Config is the master's validated configuration.
type Config struct {
	Kubeconfig     string
	NBAddress      string
	NBClientCert   string
	NBClientKey    string
	NBCACert       string
	NBServerName   string // empty: the host of each ssl: remote
	ClusterCIDR    netip.Prefix
	NodeSubnetBits int // prefix length of each node's pod subnet
	JoinSubnet     netip.Prefix
	// ServiceCIDRs and AllowedExternalIPs decide which external IPs Services may claim
	// (svcmodel.ExternalIPPolicy).
	ServiceCIDRs       []netip.Prefix
	AllowedExternalIPs []netip.Prefix
	// ControlPlaneAddresses and ControlPlanePorts are where OVN central listens, which pods
	// may not reach unless a NetworkPolicy allows it.
	ControlPlaneAddresses []netip.Prefix
	ControlPlanePorts     []uint16
	// ServiceLimits and MaxServiceVIPs refuse Services that are too large (audit M5).
	ServiceLimits  svcmodel.Limits
	MaxServiceVIPs int
	MaxPolicySize  int // ACLs, peer address sets and ipBlock prefixes of one NetworkPolicy
	LeaderElect    bool
	// LeaderElectNamespace and LeaderElectName name the coordination.k8s.io Lease the
	// masters compete for.
	LeaderElectNamespace string
	LeaderElectName      string
	ResyncPeriod         time.Duration
	KubeAPIQPS           int
	KubeAPIBurst         int
	Workers              int
	SyncTimeout          time.Duration // longest sync of one key
	HealthAddress        string        // /metrics, /healthz, /readyz; "" for none
	NBInactivityProbe    time.Duration // interval of the NB echo, and its deadline
	Verbosity            int
	// GCPercent is the garbage collector's target percentage; 0 leaves the runtime's default
	// (or $GOGC).
	GCPercent int
	// MemoryLimitMiB is the Go runtime's soft memory limit; 0 leaves the runtime's default
	// (or $GOMEMLIMIT).
	MemoryLimitMiB int
}

func flags() []cli.Flag {
	return []cli.Flag{
		cliapp.String("kubeconfig", "", "kubeconfig file; empty means in-cluster configuration"),
		cliapp.String("nb-address", "unix:/var/run/ovn/ovnnb_db.sock", "OVN Northbound remotes, comma separated (unix:PATH, tcp:IP:PORT, ssl:IP:PORT)"),
		cliapp.String("nb-client-cert", "", "client certificate for ssl: remotes"),
		cliapp.String("nb-client-key", "", "client private key for ssl: remotes"),
		cliapp.String("nb-ca-cert", "", "CA certificate for ssl: remotes"),
		cliapp.String("nb-server-name", "", "name the NB servers' certificates must carry (DNS or IP subject alternative name) on ssl: remotes; empty means the host of each remote"),
		cliapp.String(contract.FlagClusterCIDR, "10.244.0.0/16", "pod network, split into one subnet per node (what every ovnt-node is given)"),
		cliapp.Int("node-subnet-prefix", 24, "prefix length of each node's pod subnet"),
		cliapp.String(contract.FlagJoinSubnet, contract.DefaultJoinSubnet, "subnet linking the cluster router to the gateway routers; must overlap neither the cluster CIDR nor the Service range (what every ovnt-node is given)"),
		cliapp.String(contract.FlagServiceCIDR, "10.96.0.0/16", "service address ranges, comma separated: no Service may claim an external IP in them (what every ovnt-node is given)"),
		cliapp.String(contract.FlagAllowedExternalIPCIDRs, "", "ranges Services may claim as externalIPs or LoadBalancer ingress IPs, comma separated; empty allows none. Node addresses and the cluster, service and join ranges are refused even inside them (what every ovnt-node is given)"),
		cliapp.Int(contract.FlagMaxServiceFrontends, svcmodel.DefaultMaxServiceFrontends, "most frontends (ports times cluster, external and ingress IPs and node port) of one Service; a larger Service is not implemented, with an Event (0: no limit; what every ovnt-node is given)"),
		cliapp.Int(contract.FlagMaxNamespaceFrontends, svcmodel.DefaultMaxNamespaceFrontends, "most frontends of all the Services of one namespace, oldest first; a Service past it is not implemented, with an Event (0: no limit; what every ovnt-node is given)"),
		cliapp.Int(contract.FlagMaxNamespaceEntryPoints, svcmodel.DefaultMaxNamespaceEntryPoints, "most gateway entry points (ports times external and ingress IPs, and node ports) of all the Services of one namespace, oldest first, each two rules on every node's gateway bridge; a Service past it is not implemented, with an Event (0: no limit; what every ovnt-node is given)"),
		cliapp.Int(contract.FlagMaxNamespaceVIPs, svcmodel.DefaultMaxNamespaceVIPs, "most load balancer VIPs of all the Services of one namespace, oldest first (frontends, a node port twice, and once more per node for a traffic policy Local, node port affinity or a traffic distribution); a Service past it is not implemented, with an Event (0: no limit)"),
		cliapp.Int("max-service-vips", 50000, "most VIPs of one Service's load balancers in all (its frontends times the nodes, with a traffic policy Local); a larger Service is not implemented, with an Event (0: no limit)"),
		cliapp.Int("max-policy-size", netpol.DefaultMaxSize, "most ACLs, peer address sets and ipBlock prefixes (an ipBlock less its excepts and the nodes' addresses) of one NetworkPolicy; a larger policy isolates the pods it selects with no allow rule, with an Event (0: no limit)"),
		cliapp.String(flagControlPlaneAddresses, "", "OVN central's addresses (IPv4 addresses or CIDRs, comma separated): pods may not open connections to their --control-plane-ports unless a NetworkPolicy allows it; empty: no such rule"),
		cliapp.String(flagControlPlanePorts, "6641,6642,6643,6644", "TCP ports of --control-plane-addresses closed to pods: OVN Northbound, Southbound and their RAFT ports"),
		cliapp.Bool("leader-elect", true, "run leader election so that only one of several masters writes"),
		cliapp.String("leader-elect-namespace", "kube-system", "namespace of the leader election Lease"),
		cliapp.String("leader-elect-name", "ovnt-master", "name of the leader election Lease"),
		cliapp.Duration("resync-period", 10*time.Minute, "full reconcile period of every controller (0 disables it)"),
		cliapp.Int("workers", 4, "objects synced in parallel"),
		cliapp.String("health-address", "127.0.0.1:9476", "host:port of /metrics (Prometheus), /healthz and /readyz; empty turns them off. The default is reachable only from the host (the master runs in the host network)"),
		cliapp.Duration("sync-timeout", 30*time.Second, "longest sync of one object, its NB transaction included; a longer one is retried"),
		cliapp.Duration("nb-inactivity-probe", 10*time.Second, "how often the master sends the NB an echo, and how long it waits for the reply before it reconnects"),
		cliapp.Int("kube-api-qps", 100, "sustained requests per second to the API server (each new pod costs one)"),
		cliapp.Int("kube-api-burst", 200, "short bursts of requests to the API server above --kube-api-qps"),
		cliapp.Int("gc-percent", 50, "the Go garbage collector's target: the heap may grow this many percent over the live heap before a collection (0: Go's default, or $GOGC)"),
		cliapp.Int("memory-limit-mib", 0, "soft limit of the master's Go heap in MiB (0: none, or $GOMEMLIMIT); below the live heap the collector runs all the time, so leave room"),
		cliapp.Int("log-level", 0, "log verbosity, as ovnt-node's: 0 start-up, warnings and errors; 2 every change written; 4 every sync"),
	}
}

// configFrom reads and validates the flags.
func configFrom(c *cli.Context) (Config, error) {
	cfg := Config{
		Kubeconfig:     c.String("kubeconfig"),
		NBAddress:      c.String("nb-address"),
		NBClientCert:   c.String("nb-client-cert"),
		NBClientKey:    c.String("nb-client-key"),
		NBCACert:       c.String("nb-ca-cert"),
		NBServerName:   c.String("nb-server-name"),
		NodeSubnetBits: c.Int("node-subnet-prefix"),
		LeaderElect:    c.Bool("leader-elect"),

		LeaderElectNamespace: c.String("leader-elect-namespace"),
		LeaderElectName:      c.String("leader-elect-name"),
		ResyncPeriod:         c.Duration("resync-period"),
		Workers:              c.Int("workers"),
		SyncTimeout:          c.Duration("sync-timeout"),
		HealthAddress:        c.String("health-address"),
		NBInactivityProbe:    c.Duration("nb-inactivity-probe"),
		KubeAPIQPS:           c.Int("kube-api-qps"),
		KubeAPIBurst:         c.Int("kube-api-burst"),
		Verbosity:            c.Int("log-level"),
		GCPercent:            c.Int("gc-percent"),
		MemoryLimitMiB:       c.Int("memory-limit-mib"),
		ServiceLimits: svcmodel.Limits{PerService: c.Int(contract.FlagMaxServiceFrontends),
			PerNamespace:            c.Int(contract.FlagMaxNamespaceFrontends),
			PerNamespaceEntryPoints: c.Int(contract.FlagMaxNamespaceEntryPoints),
			PerNamespaceVIPs:        c.Int(contract.FlagMaxNamespaceVIPs)},
		MaxServiceVIPs: c.Int("max-service-vips"),
		MaxPolicySize:  c.Int("max-policy-size"),
	}
	// The master takes only one cluster CIDR; the Service ranges only to refuse them as
	// external IPs (Services' addresses come from the API server).
	nets, err := contract.ParseClusterNetworks(c.String(contract.FlagClusterCIDR), c.String(contract.FlagServiceCIDR))
	if err != nil {
		return Config{}, err
	}
	cfg.ServiceCIDRs = nets.ServiceCIDRs
	if cfg.AllowedExternalIPs, err = contract.ParseExternalIPCIDRs(c.String(contract.FlagAllowedExternalIPCIDRs)); err != nil {
		return Config{}, err
	}
	if cfg.ControlPlaneAddresses, err = parseControlPlaneAddresses(c.String(flagControlPlaneAddresses)); err != nil {
		return Config{}, err
	}
	if cfg.ControlPlanePorts, err = parsePorts(flagControlPlanePorts, c.String(flagControlPlanePorts)); err != nil {
		return Config{}, err
	}
	if len(nets.ClusterCIDRs) != 1 {
		return Config{}, fmt.Errorf("--%s %q: the master takes one prefix", contract.FlagClusterCIDR, c.String(contract.FlagClusterCIDR))
	}
	cfg.ClusterCIDR = nets.ClusterCIDRs[0]
	if cfg.JoinSubnet, err = contract.ParseJoinSubnet(c.String(contract.FlagJoinSubnet)); err != nil {
		return Config{}, err
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	if c.NBAddress == "" {
		return fmt.Errorf("--nb-address is empty")
	}
	// IPv4 only for now: the MAC of an interface derives from its IPv4 address
	// (contract.ParseClusterNetworks checked the cluster CIDR).
	if !c.JoinSubnet.Addr().Is4() {
		return fmt.Errorf("--join-subnet %s: only IPv4 is supported", c.JoinSubnet)
	}
	// A node subnet keeps its network, broadcast, router (.1) and management (.2) addresses.
	const maxBits = 29
	if c.NodeSubnetBits <= c.ClusterCIDR.Bits() || c.NodeSubnetBits > maxBits {
		return fmt.Errorf("--node-subnet-prefix /%d must be longer than the cluster CIDR %s and leave room for pods (at most /%d)", c.NodeSubnetBits, c.ClusterCIDR, maxBits)
	}
	if c.JoinSubnet.Bits() > 30 {
		return fmt.Errorf("--join-subnet %s has no room for gateway routers", c.JoinSubnet)
	}
	if c.LeaderElect && (c.LeaderElectNamespace == "" || c.LeaderElectName == "") {
		return fmt.Errorf("--leader-elect needs --leader-elect-namespace and --leader-elect-name")
	}
	if c.KubeAPIQPS < 1 || c.KubeAPIBurst < c.KubeAPIQPS {
		return fmt.Errorf("--kube-api-qps must be at least 1 and --kube-api-burst at least --kube-api-qps")
	}
	if c.ResyncPeriod < 0 || c.Workers < 1 {
		return fmt.Errorf("--resync-period must not be negative and --workers must be at least 1")
	}
	if c.SyncTimeout <= 0 || c.NBInactivityProbe <= 0 {
		return fmt.Errorf("--sync-timeout and --nb-inactivity-probe must be positive")
	}
	if l := c.ServiceLimits; l.PerService < 0 || l.PerNamespace < 0 || l.PerNamespaceEntryPoints < 0 || l.PerNamespaceVIPs < 0 || c.MaxServiceVIPs < 0 || c.MaxPolicySize < 0 {
		return fmt.Errorf("--%s, --%s, --%s, --%s, --max-service-vips and --max-policy-size must not be negative",
			contract.FlagMaxServiceFrontends, contract.FlagMaxNamespaceFrontends, contract.FlagMaxNamespaceEntryPoints, contract.FlagMaxNamespaceVIPs)
	}
	if c.ClusterCIDR.Overlaps(c.JoinSubnet) {
		return fmt.Errorf("--%s %s overlaps --join-subnet %s", contract.FlagClusterCIDR, c.ClusterCIDR, c.JoinSubnet)
	}
	return nil
}

const (
	flagControlPlaneAddresses = "control-plane-addresses"
	flagControlPlanePorts     = "control-plane-ports"
)

// parseControlPlaneAddresses parses --control-plane-addresses: IPv4 addresses (a /32 each)
// or canonical prefixes, comma separated, possibly none.
func parseControlPlaneAddresses(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if !strings.Contains(f, "/") {
			var a netip.Addr
			a, err = netip.ParseAddr(f)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("--%s: %w", flagControlPlaneAddresses, err)
		case !p.Addr().Is4():
			return nil, fmt.Errorf("--%s %s: only IPv4 is supported", flagControlPlaneAddresses, f)
		case p.Masked() != p:
			return nil, fmt.Errorf("--%s %s: host bits set (did you mean %s?)", flagControlPlaneAddresses, f, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// parsePorts parses a comma-separated list of TCP ports, at least one.
func parsePorts(flag, s string) ([]uint16, error) {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--%s %q: not a port", flag, f)
		}
		out = append(out, uint16(n))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s is empty", flag)
	}
	return out, nil
}
