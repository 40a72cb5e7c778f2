// Command ovnt-cni is the CNI plugin the container runtime executes. It holds no logic: it
// forwards each CNI call to the node agent (ovnt-node) over a local socket and prints the
// agent's answer. Run by hand (without CNI_COMMAND in the environment) it is an ordinary
// command line with --help and version.
package main

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"
	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if os.Getenv("CNI_COMMAND") != "" {
		skel.PluginMainFuncs(skel.CNIFuncs{Add: forward, Del: forward, Check: forward, GC: forward, Status: forward},
			cniversion.PluginSupports("0.4.0", "1.0.0", "1.1.0"), "ovnt-cni "+cliapp.Version())
		return
	}
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-cni:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	app := cliapp.New("ovnt-cni", "CNI plugin: forwards CNI calls to the ovnt-node agent; run by the container runtime with CNI_COMMAND set", nil,
		func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		})
	return app
}

// forward is where the call goes to the node agent; the agent's CNI server is not part of
// this build yet, so every call fails with a CNI error that says so.
func forward(args *skel.CmdArgs) error {
	return types.NewError(types.ErrTryAgainLater, "ovnt-node CNI server not available in this build",
		fmt.Sprintf("container %s", args.ContainerID))
}
