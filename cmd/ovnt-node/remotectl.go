package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
	healthpkg "github.com/ovn-transparent/ovn-transparent/internal/health"
	"github.com/ovn-transparent/ovn-transparent/node/kubeconf"
	"github.com/ovn-transparent/ovn-transparent/node/remotectl"
)

// remoteControllersCommand is `ovnt-node remote-controllers`: the ovn-controllers of every
// remote chassis of the cluster, on one Linux host (docs/remote-chassis.md).
func remoteControllersCommand() *cli.Command {
	return &cli.Command{
		Name: "remote-controllers",
		Usage: "run an ovn-controller and its chassis relays for every remote Node (Windows nodes, or " +
			remotectl.LabelRemote + "=true), on this Linux host",
		Flags: []cli.Flag{
			cliapp.String("kubeconfig", "", "kubeconfig file; empty: the pod's ServiceAccount"),
			cliapp.String("rundir", "/run/ovnt-remote", "directory of the run directories, one per node: <rundir>/<node>"),
			cliapp.String("cert-dir", "/etc/ovn-transparent/remote", "directory with <node>.crt and <node>.key for each remote node and ca.crt (the Secret ovnt-remote-chassis)"),
			cliapp.Int("ovsdb-port", 6640, "the nodes' database listener (ovnt-node --ovsdb-listen)"),
			cliapp.Int("openflow-port", 6653, "the nodes' br-int listener (ovnt-node --openflow-listen); 0: no OpenFlow relay, for an ovn-controller with ovn-bridge-remote (OVN 24.09 and later)"),
			cliapp.Bool("allow-plaintext", false, "connect to the nodes over plain TCP (their listeners ptcp:): their databases and br-int unauthenticated and unencrypted on the network"),
			cliapp.String("ovn-controller", "ovn-controller", "the ovn-controller binary"),
			cliapp.Duration("max-backoff", 30*time.Second, "longest wait before an ovn-controller that exited is started again"),
			cliapp.String("health-address", "127.0.0.1:9479", "host:port of /metrics, /healthz and /readyz (ready: every remote node that can have one has a running ovn-controller); empty turns them off"),
			cliapp.Int("log-level", 0, "0: start-up, changes and errors; 2: every connection relayed"),
		},
		Action: runRemoteControllers,
	}
}

func runRemoteControllers(c *cli.Context) error {
	for _, f := range []string{"rundir", "cert-dir", "ovn-controller"} {
		if c.String(f) == "" {
			return fmt.Errorf("--%s is empty", f)
		}
	}
	for _, f := range []string{"ovsdb-port", "openflow-port"} {
		if p := c.Int(f); p < 0 || p > 65535 || (p == 0 && f == "ovsdb-port") {
			return fmt.Errorf("--%s %d: not a port", f, p)
		}
	}
	rc, err := kubeconf.Config(c.String("kubeconfig"))
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lg := newLogger(c.Int("log-level")).WithName("remote-controllers")

	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer b.Shutdown()
	sup := remotectl.NewSupervisor(remotectl.Config{
		RunDir: c.String("rundir"), OVSDBPort: c.Int("ovsdb-port"), OpenFlowPort: c.Int("openflow-port"),
		Plaintext: c.Bool("allow-plaintext"), OVNController: c.String("ovn-controller"),
		MaxBackoff: c.Duration("max-backoff"), Logger: lg,
	})
	m := &remotectl.Manager{Kube: kube, CertDir: c.String("cert-dir"), Supervisor: sup,
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ovnt-remote-controllers"})}
	if addr := c.String("health-address"); addr != "" {
		health := healthpkg.New()
		health.AddReadiness("remote-controllers", m.Ready)
		if err := health.Serve(ctx, addr, func(err error) { lg.Error(err, "Health endpoint") }); err != nil {
			return err
		}
	}
	lg.Info("watching nodes", "certDir", c.String("cert-dir"), "rundir", c.String("rundir"))
	return m.Run(ctx)
}
