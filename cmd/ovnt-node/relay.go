package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/node/chassisrelay"
)

// relayCommand is `ovnt-node chassis-relay`: it runs beside the ovn-controller of a remote
// chassis, on the controller's host, not on the node (docs/remote-chassis.md).
func relayCommand() *cli.Command {
	return &cli.Command{
		Name: "chassis-relay",
		Usage: "relay a remote chassis' ovn-controller to its node over TLS: <rundir>/" + chassisrelay.DBSocket +
			" to the node's database, <rundir>/" + chassisrelay.OFSocket + " to its br-int",
		Flags: []cli.Flag{
			cliapp.String("rundir", contract.OVSRunDir, "the ovn-controller's OVS_RUNDIR, where it finds br-int.mgmt; start it with unix:<rundir>/"+chassisrelay.DBSocket+" as its database"),
			cliapp.String("node-address", "", "the node's address (host name or IP), where it listens"),
			cliapp.Int("ovsdb-port", 6640, "the node's database listener (ovnt-node --ovsdb-listen)"),
			cliapp.Int("openflow-port", 6653, "the node's br-int listener (ovnt-node --openflow-listen); 0: no OpenFlow relay, for an ovn-controller with ovn-bridge-remote (OVN 24.09 and later)"),
			cliapp.Bool("allow-plaintext", false, "connect to the node over plain TCP (its listeners ptcp:): the node's database and br-int unauthenticated and unencrypted on the network"),
			cliapp.String("client-cert", "", "certificate the relay presents to the node (the remote controller's, which the node's listeners trust)"),
			cliapp.String("client-key", "", "private key of --client-cert"),
			cliapp.String("ca-cert", "", "CA certificate the node's listener certificate is checked against"),
			cliapp.String("server-name", "", "name the node's listener certificate must carry; empty: --node-address"),
			cliapp.Duration("dial-timeout", 10*time.Second, "how long one connection to the node, TLS handshake included, may take"),
			cliapp.Int("log-level", 0, "0: start-up and errors; 2: every connection relayed"),
		},
		Action: runRelay,
	}
}

func runRelay(c *cli.Context) error {
	relays, err := relaysFrom(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lg := newLogger(c.Int("log-level")).WithName("chassis-relay")
	// One relay failing (its socket cannot be made) stops the other: ovn-controller is of no
	// use with half its connections.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(relays))
	for _, r := range relays {
		r.Logger = lg
		go func() {
			err := r.Run(ctx)
			cancel()
			errs <- err
		}()
	}
	var all []error
	for range relays {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// relaysFrom reads and checks the relay's flags.
func relaysFrom(c *cli.Context) ([]*chassisrelay.Relay, error) {
	node, rundir := c.String("node-address"), c.String("rundir")
	if node == "" {
		return nil, fmt.Errorf("--node-address is empty")
	}
	if rundir == "" {
		return nil, fmt.Errorf("--rundir is empty")
	}
	for _, f := range []string{"ovsdb-port", "openflow-port"} {
		if p := c.Int(f); p < 0 || p > 65535 || (p == 0 && f == "ovsdb-port") {
			return nil, fmt.Errorf("--%s %d: not a port", f, p)
		}
	}
	var tlsCfg *ovsdb.Config
	if !c.Bool("allow-plaintext") {
		tlsCfg = &ovsdb.Config{
			PrivateKeyFile: c.String("client-key"), CertificateFile: c.String("client-cert"),
			CACertFile: c.String("ca-cert"), ServerName: c.String("server-name"),
		}
	}
	relays, err := chassisrelay.NodeRelays(rundir, node, c.Int("ovsdb-port"), c.Int("openflow-port"), tlsCfg, c.Duration("dial-timeout"))
	if err != nil && tlsCfg != nil {
		return nil, fmt.Errorf("--client-cert, --client-key, --ca-cert: %w", err)
	}
	return relays, err
}
