//go:build linux

// Command ovnt-sandbox runs the local sandbox cluster: `up` starts it in the background and
// prints what runs, `down` stops it, `status` shows it again, and `exec` runs a command on a
// node or the external host. Everything lives in one harness run owned by a `serve` process;
// stopping that process (down, or killing it) tears the whole sandbox down.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ovnt-sandbox:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	app := cliapp.New("ovnt-sandbox", "a local cluster with real Kubernetes and OVN in network namespaces",
		[]cli.Flag{cliapp.String("state-dir", "_output/sandbox", "where the sandbox keeps its kubeconfig, state and log")}, nil)
	app.Commands = append(app.Commands,
		&cli.Command{Name: "up", Usage: "start the sandbox in the background (or show the one running)",
			Flags:  []cli.Flag{&cli.IntFlag{Name: "nodes", Value: 2, Usage: "number of nodes"}},
			Action: up},
		&cli.Command{Name: "serve", Usage: "run the sandbox in the foreground until SIGTERM (what up starts)", Hidden: true,
			Flags:  []cli.Flag{&cli.IntFlag{Name: "nodes", Value: 2}},
			Action: serve},
		&cli.Command{Name: "down", Usage: "stop the sandbox and remove everything it created", Action: down},
		&cli.Command{Name: "status", Usage: "show the running sandbox", Action: status},
		&cli.Command{Name: "exec", Usage: "run a command in a pod's, a node's or the external host's network namespace",
			ArgsUsage: "<namespace>/<pod>|node/<name>|external -- COMMAND [ARGS...]", Action: execCmd},
	)
	return app
}
