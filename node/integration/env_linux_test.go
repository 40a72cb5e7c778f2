package integration

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

var programs = []string{
	"ip", "ethtool", "sysctl", "ping", "go",
	"ovsdb-tool", "ovsdb-server", "ovsdb-client", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl",
	"ovn-northd", "ovn-controller", "ovn-nbctl", "ovn-sbctl",
}

const (
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	joinSubnet  = "100.64.0.0/16"
	// annotationTimeout is the agents' --pod-annotation-timeout: short, for the test of a
	// pod the master never annotates.
	annotationTimeout = 4 * time.Second
	// leakCollectInterval is the agents' --leak-collect-interval.
	leakCollectInterval = time.Second
)

// env is a cluster without a master: the test writes what the master would, with the
// master's own row builders (master/topology) and writer (master/nb).
type env struct {
	t       *testing.T
	r       *harness.Run
	central *harness.OVNCentral
	nb      client.Client // to central's NB
	topo    topology.Config
	kube    *harness.Kube
	client  kubernetes.Interface
	nodes   []*node
	// gatewayResync is the agents' --gateway-resync; zero leaves the default.
	gatewayResync time.Duration
}

// node is a harness node running ovnt-node.
type node struct {
	*harness.Node
	index  int          // node i has subnet 10.244.i.0/24
	subnet netip.Prefix // its pod subnet
	// gw is the gateway router's part of the node's rows; nil until masterGateways.
	gw      *topology.Gateway
	agentN  int    // agents started, to name their logs
	dir     string // the agent's CNI socket, bin and conf directories
	socket  string
	binDir  string
	confDir string
	kubecfg string
	agent   *harness.Proc
}

func (n *node) gateway() netip.Addr { return contract.RouterIP(n.subnet) }
func (n *node) mgmtIP() netip.Addr  { return contract.ManagementIP(n.subnet) }

// newEnv starts OVN central, an API server and the named nodes (as harness nodes without a
// chassis), creates their Node objects and the NB rows the master would, but starts no
// agent.
func newEnv(ctx context.Context, t *testing.T, names ...string) *env {
	t.Helper()
	harness.Require(t, programs...)
	r := harness.NewTestRun(t)
	e := &env{t: t, r: r}
	var wg sync.WaitGroup
	var kerr, cerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.kube, kerr = r.StartKube(ctx, harness.KubeOptions{APIServerOnly: true, ServiceCIDR: serviceCIDR})
	}()
	e.central, cerr = r.StartOVNCentral(ctx)
	wg.Wait()
	if kerr != nil || cerr != nil {
		t.Fatalf("kube: %v; central: %v", kerr, cerr)
	}
	e.client = e.kube.Client()
	for _, name := range names {
		if _, err := r.NodeIP(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	e.topo = topology.Config{ClusterCIDR: netip.MustParsePrefix(clusterCIDR), JoinSubnet: netip.MustParsePrefix(joinSubnet)}
	e.nb = connectNB(ctx, t, e.central.NBRemote)
	t.Cleanup(func() { e.nb.Close() })
	e.applyNB(ctx, nb.Key{Kind: nb.Cluster, Name: nb.ClusterName}, topology.Cluster(e.topo))
	for i, name := range names {
		hn, err := r.StartNode(ctx, name, harness.NodeOptions{SkipChassis: true})
		if err != nil {
			t.Fatal(err)
		}
		n := &node{Node: hn, index: i + 1, subnet: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i+1))}
		n.dir = r.Path("agents", name)
		n.socket, n.binDir, n.confDir = filepath.Join(n.dir, "run", "cni.sock"), filepath.Join(n.dir, "bin"), filepath.Join(n.dir, "net.d")
		if n.kubecfg, err = e.kube.ExposeInNetns(n.Netns); err != nil {
			t.Fatal(err)
		}
		e.createNode(ctx, n)
		e.applyNode(ctx, n)
		e.nodes = append(e.nodes, n)
	}
	e.ensureNamespace(ctx, "default")
	return e
}

// createNode registers the Node object, as kubelet would, with the subnet the master would
// allocate.
func (e *env) createNode(ctx context.Context, n *node) {
	e.t.Helper()
	_, err := e.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        n.Name,
		Annotations: map[string]string{contract.NodeSubnetKey: n.subnet.String()},
	}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// applyNode writes n's rows as the master would: its switch, joined to the cluster router,
// the management port's logical port and, once n.gw is set, its gateway router.
func (e *env) applyNode(ctx context.Context, n *node) {
	e.t.Helper()
	rows, err := topology.NodeRows(e.topo, topology.Node{Name: n.Name, Subnet: n.subnet, Gateway: n.gw})
	if err != nil {
		e.t.Fatal(err)
	}
	e.applyNB(ctx, nb.Key{Kind: nb.Node, Name: n.Name}, rows)
}

// applyNB converges key's rows in the NB to rows, in one transaction.
func (e *env) applyNB(ctx context.Context, key nb.Key, rows []nb.Row) {
	e.t.Helper()
	p, err := nb.Diff(ctx, nb.NewCacheView(e.nb), key, rows)
	if err != nil {
		e.t.Fatalf("%s: %v", key, err)
	}
	if _, err := p.Apply(ctx, e.nb); err != nil {
		e.t.Fatalf("%s: %v", key, err)
	}
}

// connectNB connects to the NB at remote, caching the tables the master writes.
func connectNB(ctx context.Context, t *testing.T, remote string) client.Client {
	t.Helper()
	c, err := nb.Connect(ctx, ovsdb.Config{Remotes: remote})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ensureNamespace creates a namespace and its default ServiceAccount (no controller-manager
// runs to do it, and pod admission needs it).
func (e *env) ensureNamespace(ctx context.Context, ns string) {
	e.t.Helper()
	if ns != "default" {
		if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	_, err := e.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// agentArgs are the flags of n's ovnt-node.
func (e *env) agentArgs(n *node) []string {
	args := []string{
		"--node-name", n.Name,
		"--kubeconfig", n.kubecfg,
		// ovn-controller reaches the SB over TLS with the node's certificate, which the
		// agent writes into the SSL row.
		"--sb-address", n.SBRemote,
		"--sb-client-cert", n.SBCert.CertFile,
		"--sb-client-key", n.SBCert.KeyFile,
		"--sb-ca-cert", n.SBCert.CAFile,
		"--ovs-address", n.OVSRemote,
		"--datapath-type", "netdev",
		"--uplink-interface", "eth0",
		"--cluster-cidr", clusterCIDR,
		"--service-cidr", serviceCIDR,
		"--cni-socket", n.socket,
		"--cni-bin-dir", n.binDir,
		"--cni-conf-dir", n.confDir,
		"--cni-plugin", cniBin,
		"--pod-annotation-timeout", annotationTimeout.String(),
		"--port-install-timeout", "10s",
		// Short, so TestCNI sees leaked ports collected; every other test then shows the
		// collector takes nothing of a pod that still exists.
		"--leak-collect-interval", leakCollectInterval.String(),
		"--log-level", "1",
		// No --ovs-rundir: the agent finds br-phy.mgmt beside --ovs-address's db.sock.
	}
	if e.gatewayResync > 0 {
		args = append(args, "--gateway-resync", e.gatewayResync.String())
	}
	return args
}

// startAgent runs ovnt-node in n's namespace and waits until it serves CNI and has
// installed the plugin.
func (e *env) startAgent(ctx context.Context, n *node) {
	e.t.Helper()
	t0 := time.Now()
	n.agentN++
	p, err := e.r.Start(harness.ProcSpec{
		Name: fmt.Sprintf("ovnt-node-%s-%d", n.Name, n.agentN), Netns: n.Netns, Path: nodeBin, Args: e.agentArgs(n),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	n.agent = p
	conf := filepath.Join(n.confDir, cni.ConfListName)
	poll.Eventually(e.t, ctx, n.Name+" agent serving", 0, 50*time.Millisecond, func() (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("ovnt-node exited: %v", p.Err())
		default:
		}
		if _, err := os.Stat(conf); err != nil {
			return false, err
		}
		// The conflist of a previous agent may be there already: the socket tells.
		_, err := cni.NewClient(dialer(n.socket)).Do(ctx, cni.Request{Command: "STATUS", StdinData: []byte(`{"cniVersion":"1.1.0"}`)})
		if err != nil && strings.Contains(err.Error(), "unreachable") {
			return false, err
		}
		return true, nil
	})
	e.t.Logf("%s: ovnt-node serving after %v", n.Name, time.Since(t0).Round(time.Millisecond))
}

// startControllers starts every node's ovn-controller, once the agents configured the
// chassis.
func (e *env) startControllers(ctx context.Context) {
	e.t.Helper()
	for _, n := range e.nodes {
		if _, err := n.StartOVNController(ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitReady waits until every agent answers STATUS with success: ovn-controller has
// installed the management port.
func (e *env) waitReady(ctx context.Context) {
	e.t.Helper()
	t0 := time.Now()
	for _, n := range e.nodes {
		poll.Eventually(e.t, ctx, n.Name+" STATUS ok", 0, 100*time.Millisecond, func() (bool, error) {
			_, err := cni.NewClient(dialer(n.socket)).Do(ctx, cni.Request{Command: "STATUS", StdinData: []byte(`{"cniVersion":"1.1.0"}`)})
			return err == nil, err
		})
	}
	e.t.Logf("all agents ready after %v", time.Since(t0).Round(time.Millisecond))
}
