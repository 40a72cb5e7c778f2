// Package cnishim is the CNI plugin the container runtime executes (the ovnt-cni binary,
// wired by cmd/ovnt-cni). It holds no network logic: each call (ADD, DEL, CHECK, GC, STATUS)
// is packed with the runtime's arguments into an internal/cni Request, sent to the node
// agent (ovnt-node) over its local socket, and the agent's answer is printed. VERSION is
// answered by skel without the agent.
package cnishim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// RequestTimeout bounds one call. ADD waits in the agent for the master's annotation and
// for ovn-controller; kubelet gives the whole sandbox set-up about four minutes.
const RequestTimeout = 3 * time.Minute

// Plugin forwards CNI calls to the node agent.
type Plugin struct {
	// Dial connects to the agent's socket at path; nil means the OS's (dial).
	Dial func(ctx context.Context, path string) (net.Conn, error)
	// Out receives the agent's answer; nil means os.Stdout.
	Out io.Writer
	// Timeout bounds one call; zero means RequestTimeout.
	Timeout time.Duration
}

// Active reports whether the process was started by a container runtime (CNI_COMMAND is
// set), rather than by hand.
func Active() bool { return os.Getenv("CNI_COMMAND") != "" }

// Main runs the plugin as the CNI specification asks: the call from the environment and
// stdin, the answer or the CNI error on stdout, and the exit status. about is what VERSION
// and a call without a command print.
func Main(about string) {
	var p Plugin
	skel.PluginMainFuncs(p.Funcs(), cniversion.PluginSupports(cni.SupportedVersions...), about)
}

// Funcs returns the skel functions of every command the plugin forwards.
func (p Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    p.forwarder("ADD"),
		Del:    p.forwarder("DEL"),
		Check:  p.forwarder("CHECK"),
		GC:     p.forwarder("GC"),
		Status: p.forwarder("STATUS"),
	}
}

func (p Plugin) forwarder(command string) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error { return p.Forward(context.Background(), command, args) }
}

// Forward sends one call to the agent named by the network configuration's socket (the
// contract's default when it names none) and writes the agent's answer (an ADD result,
// already in the requested cniVersion) to Out. The error is a *types.Error: the agent's, or
// "try again later" (11) when the agent cannot be reached, "not available" (50) for STATUS.
func (p Plugin) Forward(ctx context.Context, command string, args *skel.CmdArgs) error {
	conf, err := cni.ParseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	socket := conf.Socket
	if socket == "" {
		socket = contract.CNISocket
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = RequestTimeout
	}
	dialer := p.Dial
	if dialer == nil {
		dialer = dial
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := cni.NewClient(func(ctx context.Context) (net.Conn, error) { return dialer(ctx, socket) })
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
	if len(out) == 0 {
		return nil
	}
	w := p.Out
	if w == nil {
		w = os.Stdout
	}
	if _, err := w.Write(out); err != nil {
		return types.NewError(types.ErrIOFailure, "writing the result", err.Error())
	}
	return nil
}
