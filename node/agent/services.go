package agent

import (
	"context"
	"errors"
	"net/netip"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
	"github.com/ovn-transparent/ovn-transparent/node/services"
)

// startServices runs the node's part of Services until ctx ends: the gateway bridge's entry
// points (gw may be nil: no gateway bridge, no entry points), the host's own NodePort access
// when the system has it (cfg.LocalNodePorts), and the healthCheckNodePort servers. stop
// waits for it to end.
func startServices(ctx context.Context, cfg Config, client kubernetes.Interface, addr hostnet.NodeAddress,
	gw *gateway.Controller, log logr.Logger) (stop func()) {
	sc := services.Config{NodeName: cfg.NodeName, NodeIP: addr.IP.Addr(), AllowedExternalIPs: cfg.AllowedExternalIPs,
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
	c := services.New(sc, client, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
