package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// startGateway keeps the gateway bridge's OpenFlow rules in place until ctx ends, through
// the bridge's management socket. It runs from the start, before the master has created
// the gateway router: without a patch port the rules are the host's part, and the GR's part
// follows once ovn-controller makes the port. stop closes the OpenFlow connection; the
// bridge keeps its flows, so a restarted agent finds them in place.
func startGateway(ctx context.Context, cfg Config, sw *ovs.Switch, addr hostnet.NodeAddress, log logr.Logger) (gw *gateway.Controller, stop func(), err error) {
	target := "unix:" + filepath.Join(cfg.OVSRunDir, cfg.GatewayBridge+".mgmt")
	of, err := openflow.New(target, openflow.Options{
		Logf: func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		return nil, nil, err
	}
	c := gateway.New(gateway.Config{
		Bridge: cfg.GatewayBridge, Uplink: cfg.UplinkIface, LocalnetPort: contract.LocalnetPort(cfg.NodeName),
		MAC: addr.MAC, IP: addr.IP.Addr(), Tunnel: gateway.TunnelFor(cfg.EncapType), Resync: cfg.GatewayResync,
		HostPort: addr.HostPort,
	}, sw, of, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return c, func() {
		cancel()
		<-done
		of.Close()
	}, nil
}
