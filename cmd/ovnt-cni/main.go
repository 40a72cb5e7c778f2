// Command ovnt-cni is the CNI plugin the container runtime executes; the plugin is cni-shim.
// Run by hand (without CNI_COMMAND in the environment) it is an ordinary command line with
// --help and version.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	cnishim "github.com/ovn-transparent/ovn-transparent/cni-shim"
	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if cnishim.Active() {
		cnishim.Main("ovnt-cni " + cliapp.Version())
		return
	}
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-cni:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return cliapp.New("ovnt-cni", "CNI plugin: forwards CNI calls to the ovnt-node agent; run by the container runtime with CNI_COMMAND set", nil,
		func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		})
}
