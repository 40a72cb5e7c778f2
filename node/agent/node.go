package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// resyncPeriod re-runs sync even without Node events: the management port's device is
// recreated without its address when ovs-vswitchd restarts, and only a sync puts it back.
const resyncPeriod = 2 * time.Minute

// nodeController keeps the agent's own Node in line: the chassis annotation says what
// setupChassis found, and the management port carries the .2 of the subnet the master
// annotated. Events only enqueue the node's name; sync does the work from the cache.
type nodeController struct {
	cfg      Config
	client   kubernetes.Interface
	sw       *ovs.Switch
	host     hostnet.Host
	chassis  contract.NodeChassisInfo
	log      logr.Logger
	informer cache.SharedIndexInformer
	lister   listers.NodeLister
	loop     *reconcile.Loop[string]
	done     netip.Prefix // last subnet the management port was set up for (sync goroutine only)
	// redirect turns the management address back into the node IP for connections OVN
	// sends the host (localnat.Redirect); nil where the system has none or
	// cfg.LocalNodePorts is off.
	redirect localnat.Redirect
}

func newNodeController(cfg Config, client kubernetes.Interface, sw *ovs.Switch, host hostnet.Host,
	ch contract.NodeChassisInfo, log logr.Logger) *nodeController {
	factory := informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}),
		informers.WithTransform(reconcile.StripManagedFields))
	inf := factory.Core().V1().Nodes()
	c := &nodeController{
		cfg: cfg, client: client, sw: sw, host: host, chassis: ch, log: log,
		informer: inf.Informer(), lister: inf.Lister(),
	}
	if cfg.LocalNodePorts {
		rd, err := localnat.NewRedirect("")
		if err != nil {
			log.Info("the host-network endpoints of this node answer Services only on addresses other than the node IP", "reason", err)
		}
		c.redirect = rd
	}
	c.loop = reconcile.New("node", c.sync, log, reconcile.Options{})
	enqueue := func(any) { c.loop.Add(cfg.NodeName) }
	c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return c
}

func (c *nodeController) synced() bool { return c.informer.HasSynced() }

func (c *nodeController) run(ctx context.Context) {
	go c.informer.Run(ctx.Done())
	c.loop.Run(ctx)
}

func (c *nodeController) sync(ctx context.Context, name string) error {
	node, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.log.Info("waiting for the Node object (kubelet registers it)", "node", name)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.annotate(ctx, node); err != nil {
		return err
	}
	s, ok := node.Annotations[contract.NodeSubnetKey]
	if !ok {
		c.log.Info("waiting for the master to allocate the node subnet", "annotation", contract.NodeSubnetKey)
		return nil
	}
	subnet, err := contract.ParseNodeSubnet(s)
	if err != nil {
		return err
	}
	if err := c.setupManagementPort(ctx, subnet); err != nil {
		return fmt.Errorf("management port: %w", err)
	}
	if nodeIP, err := netip.ParsePrefix(c.chassis.NodeIP); c.redirect != nil && err == nil {
		if err := c.redirect.Sync(ctx, contract.MgmtIfName(c.cfg.NodeName), contract.ManagementIP(subnet), nodeIP.Addr()); err != nil {
			return fmt.Errorf("management address redirect: %w", err)
		}
	}
	if c.done != subnet {
		c.log.Info("management port set up", "port", contract.MgmtIfName(c.cfg.NodeName), "subnet", subnet)
		c.done = subnet
	}
	return nil
}

// annotate writes the chassis annotation if the Node does not carry exactly it.
func (c *nodeController) annotate(ctx context.Context, node *corev1.Node) error {
	want, err := c.chassis.Marshal()
	if err != nil {
		return err
	}
	if node.Annotations[contract.NodeChassisKey] == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{contract.NodeChassisKey: want},
	}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, ktypes.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotating node %s: %w", node.Name, err)
	}
	c.log.Info("node annotated", "annotation", contract.NodeChassisKey, "value", want)
	return nil
}

// setupManagementPort gives the management port the subnet's contract.ManagementIP and the
// MAC derived from it (the master puts the same pair on the logical port
// contract.ManagementPort), and routes the cluster and service ranges through
// contract.RouterIP, the cluster router's port on the node's switch. The join subnet goes
// the same way: a gateway router balancing a NodePort to its own node's host-network pod
// sends it to the management address, force-SNATed to the router's join address, and the
// host answers through the port so that the router undoes its NAT.
func (c *nodeController) setupManagementPort(ctx context.Context, subnet netip.Prefix) error {
	gw := contract.RouterIP(subnet)
	ip := contract.ManagementIP(subnet)
	mac := contract.MACFromIP(ip)
	routes := append(append([]netip.Prefix{}, c.cfg.ClusterCIDRs...), c.cfg.ServiceCIDRs...)
	if c.cfg.JoinSubnet.IsValid() {
		routes = append(routes, c.cfg.JoinSubnet)
	}
	return c.host.SetupManagementPort(ctx, hostnet.ManagementPort{
		IfName: contract.MgmtIfName(c.cfg.NodeName), MAC: mac, IP: netip.PrefixFrom(ip, subnet.Bits()),
		Gateway: gw, Routes: routes,
		MTU: c.cfg.MTU,
		AddPort: func(ctx context.Context) error {
			_, err := c.sw.EnsurePort(ctx, IntegrationBridge, mgmtPort(c.cfg, mac))
			return err
		},
		RemovePort: func(ctx context.Context) error {
			return c.sw.DeletePort(ctx, contract.MgmtIfName(c.cfg.NodeName))
		},
	})
}
