package agent

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/conntrack"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
	"github.com/ovn-transparent/ovn-transparent/node/services"
)

// startServices runs the node's part of Services until ctx ends: the gateway bridge's entry
// points (gw may be nil: no gateway bridge, no entry points), the host's own NodePort access
// when the system has it (cfg.LocalNodePorts), the healthCheckNodePort servers, and the
// cleaning of UDP and SCTP Services' stale conntrack entries where the system has it. stop
// waits for it to end.
func startServices(ctx context.Context, cfg Config, client kubernetes.Interface, addr hostnet.NodeAddress,
	gw *gateway.Controller, log logr.Logger) (stop func()) {
	sc := services.Config{NodeName: cfg.NodeName, NodeIP: addr.IP.Addr(), PodNetworks: cfg.ClusterCIDRs, AllowedExternalIPs: cfg.AllowedExternalIPs,
		Reserved: append(append([]netip.Prefix{cfg.JoinSubnet}, cfg.ClusterCIDRs...), cfg.ServiceCIDRs...),
		Limits:   cfg.ServiceLimits}
	if gw != nil {
		sc.Gateway = gw
	}
	if cfg.LocalNodePorts {
		nat, err := localnat.New(localnat.Config{MgmtIface: contract.MgmtIfName(cfg.NodeName)})
		switch {
		case errors.Is(err, localnat.ErrNotImplemented):
			log.Info("the node's own connections to its NodePorts are not handled on this system", "reason", err.Error())
		case err != nil:
			log.Error(err, "local NodePort access disabled")
		default:
			sc.NAT = nat
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	dp, err := conntrack.NewDatapath(cfg.OVSRunDir)
	switch {
	case errors.Is(err, conntrack.ErrNotImplemented):
		log.Info("UDP clients of a Service keep a removed backend until their conntrack entry times out", "reason", err.Error())
	case err != nil:
		log.Error(err, "cleaning of stale UDP conntrack entries disabled")
	default:
		cleaner := conntrack.NewCleaner(dp, log.WithName("conntrack"))
		sc.Conntrack = cleaner
		wg.Add(1)
		go func() {
			defer wg.Done()
			cleaner.Run(ctx)
		}()
	}
	c := services.New(sc, client, log)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
