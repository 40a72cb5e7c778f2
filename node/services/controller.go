package services

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/node/conntrack"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

// Gateway takes the Service entry points; *gateway.Controller implements it.
type Gateway interface {
	// SetNodePorts replaces the set of entry points sent to the gateway router; it
	// returns at once.
	SetNodePorts([]gateway.NodePort)
}

// Config is the controller's view of the node.
type Config struct {
	NodeName string
	NodeIP   netip.Addr
	// PodNetworks are the cluster's pod networks (Desired).
	PodNetworks []netip.Prefix
	// AllowedExternalIPs and Reserved are the external IP policy's ranges (what the master
	// is given): the Services' external and ingress IPs get an entry point only if
	// svcmodel.ExternalIPPolicy admits them, with every node's address refused.
	AllowedExternalIPs []netip.Prefix
	Reserved           []netip.Prefix
	// Limits refuse Services with too many frontends (what the master is given): a refused
	// Service gets no entry point here, as it gets no load balancer from the master.
	Limits svcmodel.Limits
	// Gateway is nil when the node has no gateway bridge; NAT is nil where local NodePort
	// access is not implemented.
	Gateway Gateway
	NAT     localnat.NAT
	// Conntrack, if not nil, is given the UDP and SCTP frontends and their backends at
	// every sync, to delete the entries of backends that are gone (*conntrack.Cleaner).
	Conntrack interface{ Set(conntrack.Table) }
}

// key is the queue's one key: the node's part of Services is small and is recomputed
// whole from the informer caches (a burst of events is one sync).
const key = "services"

// Controller keeps State applied: informer events enqueue the one key, sync recomputes
// Desired from the caches and applies the parts that changed.
type Controller struct {
	cfg     Config
	log     logr.Logger
	factory informers.SharedInformerFactory
	svcs    cache.SharedIndexInformer
	slices  cache.SharedIndexInformer
	nodes   cache.SharedIndexInformer // every node: their addresses are never external IPs
	loop    *reconcile.Loop[string]
	health  *HealthServers

	// Sync goroutine only.
	appliedNAT []localnat.Rule
	natDone    bool
	lastPorts  []gateway.NodePort
}

// New returns a controller; nothing happens until Run.
func New(cfg Config, client kubernetes.Interface, log logr.Logger) *Controller {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(reconcile.StripManagedFields))
	c := &Controller{
		cfg: cfg, log: log, factory: factory,
		svcs:   factory.Core().V1().Services().Informer(),
		slices: factory.Discovery().V1().EndpointSlices().Informer(),
		nodes:  factory.Core().V1().Nodes().Informer(),
		health: NewHealthServers(cfg.NodeIP),
	}
	c.loop = reconcile.New("node-services", func(ctx context.Context, _ string) error { return c.sync(ctx) }, log, reconcile.Options{})
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.loop.Add(key) },
		UpdateFunc: func(any, any) { c.loop.Add(key) },
		DeleteFunc: func(any) { c.loop.Add(key) },
	}
	c.svcs.AddEventHandler(h)
	c.slices.AddEventHandler(h)
	c.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.loop.Add(key) },
		// Node status changes every few seconds; only the addresses matter here.
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if !slices.Equal(svcmodel.NodeIPs([]*corev1.Node{o}), svcmodel.NodeIPs([]*corev1.Node{n})) {
				c.loop.Add(key)
			}
		},
		DeleteFunc: func(any) { c.loop.Add(key) },
	})
	return c
}

// Run syncs until ctx ends. The gateway flows and the NAT rules stay in place afterwards
// (a restarted agent finds them right); the health servers stop.
func (c *Controller) Run(ctx context.Context) {
	defer c.health.Close()
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.svcs.HasSynced, c.slices.HasSynced, c.nodes.HasSynced) {
		return
	}
	// After a restart nothing may be dropped before the caches are complete: the first
	// sync runs on full caches.
	c.loop.Add(key)
	c.loop.Run(ctx)
}

func (c *Controller) sync(ctx context.Context) error {
	start := time.Now()
	svcs, err := c.factory.Core().V1().Services().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	eps, err := c.factory.Discovery().V1().EndpointSlices().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	nodes, err := c.factory.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	policy := svcmodel.NewExternalIPPolicy(c.cfg.AllowedExternalIPs, c.cfg.Reserved, nodes)
	st := Desired(c.cfg.Limits.Admitted(svcs), eps, c.cfg.NodeName, c.cfg.NodeIP, c.cfg.PodNetworks, policy)
	if c.cfg.Gateway != nil && !slices.Equal(st.NodePorts, c.lastPorts) {
		c.cfg.Gateway.SetNodePorts(st.NodePorts)
		c.lastPorts = st.NodePorts
	}
	var errs []error
	if c.cfg.NAT != nil && (!c.natDone || !slices.Equal(st.LocalNAT, c.appliedNAT)) {
		if err := c.cfg.NAT.Sync(ctx, st.LocalNAT); err != nil {
			c.natDone = false
			errs = append(errs, fmt.Errorf("local NodePort rules: %w", err))
		} else {
			c.natDone, c.appliedNAT = true, st.LocalNAT
		}
	}
	if c.cfg.Conntrack != nil {
		t := conntrack.Desired(c.cfg.Limits.Admitted(svcs), eps, c.cfg.NodeName, policy.NodeIPs, policy)
		c.cfg.Conntrack.Set(t.WithManagementAddress(c.cfg.NodeIP, managementIP(nodes, c.cfg.NodeName)))
	}
	if err := c.health.Set(st.Health); err != nil {
		errs = append(errs, err)
	}
	c.log.V(4).Info("services synced", "services", len(svcs), "entryPoints", len(st.NodePorts),
		"localNAT", len(st.LocalNAT), "healthChecks", len(st.Health), "took", time.Since(start))
	return errors.Join(errs...)
}

// managementIP is node's management port address, from its subnet annotation; invalid
// while it has none.
func managementIP(nodes []*corev1.Node, node string) netip.Addr {
	for _, n := range nodes {
		if n.Name != node {
			continue
		}
		if subnet, err := contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey]); err == nil {
			return contract.ManagementIP(subnet)
		}
	}
	return netip.Addr{}
}
