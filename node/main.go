// Command ovnt-node registers its machine as an OVN chassis and serves the CNI requests of
// the pods scheduled to it, on Linux (veth into the pod's namespace) and Windows (HNS
// endpoint on a Transparent network).
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-node:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return cliapp.New("ovnt-node", "OVN chassis set-up and CNI server of one node", flags(), run)
}

func run(c *cli.Context) error {
	cfg, err := configFrom(c)
	if err != nil {
		return err
	}
	return fmt.Errorf("configuration valid (node %q, encap %s), but this build has no node agent yet", cfg.NodeName, cfg.EncapType)
}
