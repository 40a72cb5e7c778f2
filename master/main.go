// Command ovnt-master keeps the OVN Northbound database equal to what the cluster's Nodes,
// Pods, Namespaces, Services, EndpointSlices and NetworkPolicies imply.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-master:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return cliapp.New("ovnt-master", "keep OVN Northbound in step with the Kubernetes cluster", flags(), run)
}

func run(c *cli.Context) error {
	cfg, err := configFrom(c)
	if err != nil {
		return err
	}
	return fmt.Errorf("configuration valid (cluster %s, services %s, join %s), but this build has no controllers yet", cfg.ClusterCIDR, cfg.ServiceCIDR, cfg.JoinSubnet)
}
