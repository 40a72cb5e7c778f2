// Command ovnt-node registers its machine as an OVN chassis and serves the CNI requests of
// the pods scheduled to it, on Linux (veth into the pod's namespace) and Windows (HNS
// endpoint on a Transparent network).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	"github.com/ovn-transparent/ovn-transparent/node/agent"
	"github.com/ovn-transparent/ovn-transparent/node/winsvc"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-node:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	app := cliapp.New("ovnt-node", "OVN chassis set-up and CNI server of one node", flags(), run)
	app.Commands = append(app.Commands, doctorCommand(), relayCommand(), remoteControllersCommand())
	return app
}

func run(c *cli.Context) error {
	cfg, err := configFrom(c)
	if err != nil {
		return err
	}
	// SIGTERM is how kubelet and systemd stop the agent; pods keep their network.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lg := newLogger(c.Int("log-level"))
	// As a Windows service, the service manager's Stop ends ctx too.
	return winsvc.Run(ctx, "ovnt-node", func(ctx context.Context) error {
		return agent.Run(ctx, cfg, lg.WithName("ovnt-node"))
	})
}

// newLogger logs to standard error (or, as a Windows service, where winsvc says) at the
// given verbosity.
func newLogger(verbosity int) logr.Logger {
	logger := log.New(winsvc.LogOutput(os.Stderr), "", log.LstdFlags|log.Lmicroseconds)
	return funcr.New(func(prefix, args string) {
		logger.Println(prefix, args)
	}, funcr.Options{Verbosity: verbosity})
}
