// Command ovnt-cni is the CNI plugin the container runtime executes. It holds no logic: it
// forwards each CNI call to the node agent (ovnt-node) over a local socket and prints the
// agent's answer. Run by hand (without CNI_COMMAND in the environment) it is an ordinary
// command line with --help and version.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"
	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// requestTimeout bounds one call. ADD waits in the agent for the master's annotation and
// for ovn-controller; kubelet gives the whole sandbox set-up about four minutes.
const requestTimeout = 3 * time.Minute

func main() {
	if os.Getenv("CNI_COMMAND") != "" {
		skel.PluginMainFuncs(skel.CNIFuncs{Add: forward, Del: forward, Check: forward, GC: forward, Status: forward},
			cniversion.PluginSupports(cni.SupportedVersions...), "ovnt-cni "+cliapp.Version())
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

// forward sends the call to the node agent and prints its answer (an ADD result, already in
// the requested cniVersion). skel prints the error, if any, as CNI requires.
func forward(args *skel.CmdArgs) error {
	command := os.Getenv("CNI_COMMAND")
	conf, err := cni.ParseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	socket := conf.Socket
	if socket == "" {
		socket = contract.CNISocket
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	client := cni.NewClient(func(ctx context.Context) (net.Conn, error) { return dial(ctx, socket) })
	out, err := client.Do(ctx, cni.Request{
		Command:     command,
		ContainerID: args.ContainerID,
		Netns:       args.Netns,
		IfName:      args.IfName,
		Args:        args.Args,
		Path:        args.Path,
		StdinData:   args.StdinData,
	})
	if errors.Is(err, cni.ErrUnreachable) {
		// STATUS must say "not available" (50) so the runtime reports the network not
		// ready; every other command may succeed once the agent is back.
		code := types.ErrTryAgainLater
		if command == "STATUS" {
			code = types.ErrPluginNotAvailable
		}
		return types.NewError(code, fmt.Sprintf("ovnt-node is not reachable at %s", socket), err.Error())
	}
	if err != nil {
		return err
	}
	if len(out) > 0 {
		if _, err := os.Stdout.Write(out); err != nil {
			return types.NewError(types.ErrIOFailure, "writing the result", err.Error())
		}
	}
	return nil
}
