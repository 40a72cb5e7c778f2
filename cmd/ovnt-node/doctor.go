package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/node/doctor"
)

// doctorCommand is `ovnt-node [flags] doctor`: with the agent's own flags (or its service's
// command line), it checks the node and prints what is wrong and how to fix it; it exits
// non-zero if a check failed. It changes nothing.
func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check this node's HNS network, OVS, OpenFlow, chassis, management port, CNI files and leaks, and print fixes",
		Action: func(c *cli.Context) error {
			cfg, err := configFrom(c)
			if err != nil {
				return err
			}
			const timeout = 10 * time.Second
			n, closeAll := doctor.FromConfig(c.Context, doctor.Config{
				NodeName: cfg.NodeName, Kubeconfig: cfg.Kubeconfig, OVSAddress: cfg.OVSAddress, OVSRunDir: cfg.OVSRunDir,
				SBAddress: cfg.SBAddress, SBClientKey: cfg.SBClientKey, SBClientCert: cfg.SBClientCert, SBCACert: cfg.SBCACert,
				UplinkIface: cfg.UplinkIface, GatewayBridge: cfg.GatewayBridge, CNIBinDir: cfg.CNIBinDir, CNIConfDir: cfg.CNIConfDir,
				OVSDBListen: cfg.OVSDBListen, OpenFlowListen: cfg.OpenFlowListen,
			}, timeout)
			defer closeAll()
			if failed := doctor.Print(c.App.Writer, doctor.Run(c.Context, n, timeout)); failed > 0 {
				return fmt.Errorf("doctor: %d checks failed", failed)
			}
			return nil
		},
	}
}
