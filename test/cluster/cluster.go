//go:build linux

// Package cluster assembles a whole ovn-transparent cluster on one machine from the harness
// parts: the Kubernetes control plane, OVN central, the real ovnt-master binary, and per node
// a chassis network namespace running the real ovnt-node binary, ovn-controller, and either
// the real kubelet and containerd (Options.RealNodes: realnode.go) or a kubelet stand-in, both
// calling the real ovnt-cni binary. The end-to-end tests and the sandbox run on it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/kubelet"
)

// Options configure Start. The zero value is two Linux nodes.
type Options struct {
	// Nodes are the node names; default node1, node2.
	Nodes []string
	// WindowsNodes are labelled kubernetes.io/os=windows (their pods still run as Linux
	// namespaces here; the label is what the network plugin sees).
	WindowsNodes map[string]bool
	// BinDir holds ovnt-master, ovnt-node, ovnt-cni and ovnt-workload. Empty means
	// $OVNT_BIN_DIR (make test sets it to the binaries it has just built), else build them
	// into the run directory.
	BinDir string
	// MasterArgs and NodeArgs are appended to the daemons' command lines.
	MasterArgs, NodeArgs []string
	// ClusterCIDR and ServiceCIDR default to 10.244.0.0/16 and 10.96.0.0/16.
	ClusterCIDR, ServiceCIDR string
	// RealNodes runs the real kubelet and Debian's containerd on every node, with images
	// built here (realnode.go), instead of the kubelet stand-in.
	RealNodes bool
	// AllowedExternalIPs is --allowed-external-ip-cidrs of the master and every node;
	// empty means DefaultAllowedExternalIPs.
	AllowedExternalIPs string
	// Bare starts real nodes (RealNodes) on which nothing of ours runs: no ovnt-master, no
	// ovnt-node, no Open vSwitch, no ovn-controller, no CoreDNS; for a test that deploys
	// them itself, as an operator would (images/manifests). Each node's kubelet and
	// containerd share a mount namespace of the node's own, in which the host paths the
	// manifests mount are the node's directories (bare.go). Start returns once every kubelet
	// has registered its Node, which stays NotReady until a network plugin is installed.
	Bare bool
	// RemoteNodes run as remote chassis (docs/remote-chassis.md): no ovn-controller in the
	// node's namespace; it runs on a controller host of its own and reaches the node's
	// database and br-int over TLS on the underlay (harness.RemoteController).
	RemoteNodes map[string]bool
	// RemoteManager runs the remote nodes' controllers through `ovnt-node remote-controllers`
	// on their controller hosts (the manager of 60-remote-controllers.yaml, as the
	// ovnt-remote-controllers ServiceAccount), the nodes labelled
	// ovn-transparent.io/remote-chassis=true.
	RemoteManager bool
	// Zones labels real nodes (RealNodes) with topology.kubernetes.io/zone, by node name
	// (kubelet --node-labels, at registration): the upstream Topology Hints and Traffic
	// Distribution tests want nodes in several zones. Nodes not named have no zone.
	Zones map[string]string
}

// DefaultAllowedExternalIPs are the ranges a test cluster's Services may claim as external
// IPs: the documentation ranges of RFC 5737, and the underlay itself, so that the tests show
// a node's own address refused by the node-address rule, not merely by the ranges.
const DefaultAllowedExternalIPs = "192.0.2.0/24,198.51.100.0/24,203.0.113.0/24," + harness.UnderlaySubnet

// Cluster is a running cluster. Everything stops with its Run.
type Cluster struct {
	Run      *harness.Run
	Kube     *harness.Kube
	Central  *harness.OVNCentral
	External *harness.ExternalHost
	Nodes    []*Node
	BinDir   string

	opts         Options
	master       *harness.Proc
	masterHealth string          // http://127.0.0.1:<port> of the running master's health endpoints
	sa           serviceAccounts // the daemons run as the manifests' ServiceAccounts (rbac.go)
	kubeBinDir   string

	imagesOnce sync.Once
	imagesList []string
	imagesErr  error
}

// Node is one node of the cluster.
type Node struct {
	*harness.Node
	Kubelet    *kubelet.Kubelet
	Kubeconfig string // reaches the API server from inside the node's namespace
	CNIDir     string // bin/, net.d/ and the agent's socket
	agent      *harness.Proc
	c          *Cluster
	// Remote is the node's ovn-controller host when it is a remote chassis (Options.RemoteNodes).
	Remote *harness.RemoteController
	real   *realNode // with Options.RealNodes
}

// Start brings the whole cluster up and returns once every node is Ready.
func Start(ctx context.Context, r *harness.Run, opts Options) (*Cluster, error) {
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"node1", "node2"}
	}
	if opts.ClusterCIDR == "" {
		opts.ClusterCIDR = "10.244.0.0/16"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if opts.AllowedExternalIPs == "" {
		opts.AllowedExternalIPs = DefaultAllowedExternalIPs
	}
	if opts.Bare {
		opts.RealNodes = true
	}
	c := &Cluster{Run: r, opts: opts, BinDir: opts.BinDir}
	if c.BinDir == "" {
		var err error
		if c.BinDir, err = BinDir(ctx, r.Path("bin")); err != nil {
			return nil, err
		}
	}
	var err error
	if c.kubeBinDir, err = harness.EnsureKubeBinaries(ctx, harness.KubeVersion, r.Logf); err != nil {
		return nil, err
	}
	kopts := harness.KubeOptions{BinDir: c.kubeBinDir, ServiceCIDR: opts.ServiceCIDR}
	if opts.RealNodes {
		// Pods reach the API server (CoreDNS does) through the kubernetes Service, whose
		// endpoint is then the external host, which forwards to it (ExposeAt below).
		kopts.AdvertiseAddress = harness.ExternalHostIP
	}
	if c.Kube, err = r.StartKube(ctx, kopts); err != nil {
		return nil, err
	}
	c.Kube.SetClusterDialer(c.dialCluster)
	if err := c.setUpServiceAccounts(ctx); err != nil {
		return nil, err
	}
	if c.Central, err = r.StartOVNCentral(ctx); err != nil {
		return nil, err
	}
	if !opts.Bare {
		if err := c.StartMaster(ctx); err != nil {
			return nil, err
		}
	}
	for _, name := range opts.Nodes {
		if _, err := r.NodeIP(ctx, name); err != nil { // addresses in the order given
			return nil, err
		}
	}
	for _, name := range opts.Nodes {
		n, err := c.addNode(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if c.External, err = r.StartExternalHost(ctx); err != nil {
		return nil, err
	}
	if opts.Bare {
		return c, c.waitNodesRegistered(ctx)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		return nil, err
	}
	if opts.RealNodes {
		if err := c.Kube.ExposeAt(c.External.Netns, c.External.IP); err != nil {
			return nil, err
		}
		if err := c.startExternalDNS(ctx); err != nil {
			return nil, err
		}
		if err := c.deployDNS(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Node returns the node of that name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// StartMaster starts ovnt-master (again, after StopMaster or KillMaster).
func (c *Cluster) StartMaster(ctx context.Context) error {
	health, err := harness.FreeLocalAddr()
	if err != nil {
		return err
	}
	// The NB over TLS with the master's client certificate, as deployed (docs/security.md).
	args := append(c.Central.MasterArgs(),
		"--kubeconfig", c.sa.masterKubeconfig,
		"--leader-elect-namespace", images.Namespace,
		"--cluster-cidr", c.opts.ClusterCIDR,
		"--service-cidr", c.opts.ServiceCIDR,
		"--allowed-external-ip-cidrs", c.opts.AllowedExternalIPs,
		// One master: a restarted one must not wait out the previous holder's Lease.
		"--leader-elect=false",
		// Every allocation, release and NB change in its log: what a failed test is read with.
		"--log-level", "2",
		"--health-address", health,
	)
	args = append(args, c.opts.MasterArgs...)
	p, err := c.Run.Start(harness.ProcSpec{Name: "ovnt-master", Path: filepath.Join(c.BinDir, "ovnt-master"), Args: args})
	if err != nil {
		return err
	}
	c.master, c.masterHealth = p, "http://"+health
	return nil
}

// MasterHealthURL is the base URL of the running master's /metrics, /healthz and /readyz.
func (c *Cluster) MasterHealthURL() string { return c.masterHealth }

// ClusterCIDR is the pod network's CIDR.
func (c *Cluster) ClusterCIDR() string { return c.opts.ClusterCIDR }

// MasterPID is the process ID of the running ovnt-master.
func (c *Cluster) MasterPID() int { return c.master.Pid() }

// StopMaster stops ovnt-master with SIGTERM; KillMaster kills it as a crash would.
func (c *Cluster) StopMaster() error { return c.master.Stop() }

// KillMaster SIGKILLs ovnt-master.
func (c *Cluster) KillMaster() { c.master.Kill() }

func (c *Cluster) addNode(ctx context.Context, name string) (n *Node, err error) {
	hopts := harness.NodeOptions{SkipChassis: true, NoOVS: c.opts.Bare}
	if c.opts.RemoteNodes[name] {
		if hopts.Listen, err = c.remoteListenerCert(ctx, name); err != nil {
			return nil, err
		}
	}
	hn, err := c.Run.StartNode(ctx, name, hopts)
	if err != nil {
		return nil, err
	}
	n = &Node{Node: hn, c: c, CNIDir: filepath.Join(hn.Dir, "cni")}
	for _, d := range []string{"bin", "net.d"} {
		if err := os.MkdirAll(filepath.Join(n.CNIDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if n.Kubeconfig, err = c.Kube.ExposeInNetns(hn.Netns); err != nil {
		return nil, err
	}
	if c.opts.Bare {
		return n, c.startRealNode(ctx, n)
	}
	if err := n.StartAgent(ctx); err != nil {
		return nil, err
	}
	// ovn-controller waits for the chassis settings the agent writes, as the ovn-host
	// service does on a real node.
	if c.opts.RemoteNodes[name] {
		cert, err := c.Central.PKI.IssueRemoteController(name)
		if err != nil {
			return nil, err
		}
		ropts := harness.RemoteControllerOptions{Relay: filepath.Join(c.BinDir, "ovnt-node"), Cert: cert,
			BridgeRemote: harness.OVNHasBridgeRemote()}
		if c.opts.RemoteManager {
			ropts.Kube, ropts.Kubeconfig = c.Kube, c.remoteManagerKubeconfig
		}
		n.Remote, err = c.Run.StartRemoteController(ctx, hn, ropts)
		if err != nil {
			return nil, err
		}
		c.Run.AddCleanup("controller host of "+name, n.Remote.Stop)
	} else if _, err := hn.StartOVNController(ctx); err != nil {
		return nil, err
	}
	if c.opts.RealNodes {
		return n, c.startRealNode(ctx, n)
	}
	osLabel := "linux"
	if c.opts.WindowsNodes[name] {
		osLabel = "windows"
	}
	n.Kubelet, err = kubelet.New(kubelet.Config{
		NodeName:     name,
		Netns:        hn.Netns,
		NodeIP:       hn.IP,
		Client:       c.Kube.Client(),
		Run:          c.Run,
		CNIBinDirs:   []string{filepath.Join(n.CNIDir, "bin")},
		CNIConfDir:   filepath.Join(n.CNIDir, "net.d"),
		WorkloadPath: filepath.Join(c.BinDir, "ovnt-workload"),
		OS:           osLabel,
	})
	if err != nil {
		return nil, err
	}
	if err := n.Kubelet.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// remoteListenerCert is the TLS identity of a remote chassis' listeners: a server
// certificate for the node's address, letting in only the remote-controller CA's clients
// (the remote controller presents its certificate to the SB and to the node alike; an
// ordinary chassis' key opens neither listener).
func (c *Cluster) remoteListenerCert(ctx context.Context, name string) (harness.Cert, error) {
	ip, err := c.Run.NodeIP(ctx, name)
	if err != nil {
		return harness.Cert{}, err
	}
	cert, err := c.Central.PKI.IssueServer(name+"-listeners", ip)
	if err != nil {
		return harness.Cert{}, err
	}
	cert.CAFile = c.Central.PKI.RemoteCACert
	return cert, nil
}

// StartAgent starts the node's ovnt-node (again, after StopAgent or KillAgent).
func (n *Node) StartAgent(ctx context.Context) error {
	kubeconfig, err := n.agentKubeconfig(ctx)
	if err != nil {
		return err
	}
	args := []string{
		"--node-name", n.Name,
		"--kubeconfig", kubeconfig,
		"--sb-address", n.SBRemote,
	}
	if n.Listen.CertFile == "" {
		// ovn-controller's TLS identity (common name: the node name), which the agent
		// writes into the SSL row; the SB's ovn-controller role checks it. A remote
		// chassis' controller has it on its own command line, and the node no SSL row.
		args = append(args, "--sb-client-cert", n.SBCert.CertFile,
			"--sb-client-key", n.SBCert.KeyFile,
			"--sb-ca-cert", n.SBCert.CAFile)
	} else {
		args = append(args, "--ovsdb-listen", fmt.Sprintf("pssl:%d", harness.RemoteOVSDBPort),
			"--openflow-listen", fmt.Sprintf("pssl:%d", harness.RemoteOpenFlowPort))
		if harness.OVNHasBridgeRemote() {
			args = append(args, "--ovn-bridge-remote")
		}
	}
	args = append(append(args,
		"--ovs-address", n.OVSRemote,
		"--encap-ip", n.IP,
		"--datapath-type", "netdev",
		"--uplink-interface", "eth0",
		"--cluster-cidr", n.c.opts.ClusterCIDR,
		"--service-cidr", n.c.opts.ServiceCIDR,
		"--allowed-external-ip-cidrs", n.c.opts.AllowedExternalIPs,
		"--cni-socket", filepath.Join(n.CNIDir, "cni.sock"),
		"--cni-bin-dir", filepath.Join(n.CNIDir, "bin"),
		"--cni-conf-dir", filepath.Join(n.CNIDir, "net.d"),
		"--cni-plugin", filepath.Join(n.c.BinDir, "ovnt-cni"),
	), n.c.opts.NodeArgs...)
	// With real nodes the agent shares the root mount namespace, as on a host: containerd
	// mounts each pod's network namespace after the agent started, and a mount namespace
	// of the agent's own (ip netns exec) would not see it.
	p, err := n.c.Run.Start(harness.ProcSpec{Name: "ovnt-node-" + n.Name, Netns: n.Netns, HostMounts: n.c.opts.RealNodes,
		Path: filepath.Join(n.c.BinDir, "ovnt-node"), Args: args})
	if err != nil {
		return err
	}
	n.agent = p
	return nil
}

// StopAgent stops the node agent with SIGTERM.
func (n *Node) StopAgent() error { return n.agent.Stop() }

// KillAgent SIGKILLs the node agent.
func (n *Node) KillAgent() { n.agent.Kill() }

// WaitNodesReady waits until every node's kubelet reports Ready (its CNI STATUS passes).
func (c *Cluster) WaitNodesReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := poll.Until(ctx, "node "+n.Name+" Ready", 100*time.Millisecond, func() (bool, error) {
			return c.nodeReady(ctx, n.Name)
		}); err != nil {
			return err
		}
	}
	return nil
}

var errNoNode = errors.New("node not registered")
