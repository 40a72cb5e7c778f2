package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	healthpkg "github.com/ovn-transparent/ovn-transparent/internal/health"
	"github.com/ovn-transparent/ovn-transparent/node/cniserver"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/install"
	"github.com/ovn-transparent/ovn-transparent/node/kubeconf"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/pods"
)

// Run is the agent's life: chassis first (ovn-controller can start while the rest comes
// up; on Windows with the node subnet, which the HNS network is created with: the
// existing network's, else the master's, see startup) and the gateway bridge's flows, then the API server, then the CNI socket, and the
// plugin is installed last, so a runtime that finds the configuration finds an agent
// answering behind it. It returns nil when ctx ends; pods keep their interfaces and ports,
// and the gateway bridge its flows, across a restart.
func Run(ctx context.Context, cfg Config, log logr.Logger) error {
	start := time.Now()
	// Health first: kubelet's liveness probe must find the agent alive while it waits for
	// its database, its Node's subnet or the API server; it is ready once it can serve ADDs.
	health := healthpkg.New()
	var ready atomic.Pointer[func(context.Context) error]
	health.AddReadiness("node", func() error {
		f := ready.Load()
		if f == nil {
			return errors.New("starting: chassis, gateway bridge and CNI server not set up yet")
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return (*f)(ctx)
	})
	if err := health.Serve(ctx, cfg.HealthAddress, func(err error) { log.Error(err, "Health endpoint") }); err != nil {
		return err
	}
	sw, err := ovs.Connect(ctx, cfg.OVSAddress, log.WithName("ovsdb"), health.Registry)
	if err != nil {
		return err
	}
	defer sw.Close()
	metrics, err := newNodeMetrics(health.Registry, sw)
	if err != nil {
		return err
	}
	host := hostnet.New(log.WithName("hostnet"))
	client, err := kubeClient(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	ch, addr, err := startup(ctx, cfg, sw, host, client, log)
	if err != nil {
		return err
	}
	log.Info("chassis configured", "systemID", ch.ChassisID, "nodeIP", ch.NodeIP, "took", time.Since(start).Round(time.Millisecond))
	// A remote chassis' database listener: the remote ovn-controller's only way in.
	var listenerErr atomic.Pointer[error]
	if cfg.OVSDBListen != "" {
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			port, err := awaitManagerListener(lctx, sw, cfg.OVSDBListen)
			if err != nil {
				if ctx.Err() == nil {
					log.Error(err, "the remote ovn-controller cannot reach this node's database")
					listenerErr.Store(&err)
				}
				return
			}
			log.Info("the database listens for the remote ovn-controller", "target", cfg.OVSDBListen, "port", port)
		}()
	}
	var gw *gateway.Controller
	if cfg.UplinkIface != "" {
		var stopGateway func()
		gw, stopGateway, err = startGateway(ctx, cfg, sw, addr, log.WithName("gateway"))
		if err != nil {
			return fmt.Errorf("gateway bridge: %w", err)
		}
		defer stopGateway()
	}

	watcher := pods.NewWatcher(client, cfg.NodeName)
	watcher.Start(ctx)
	nodes := newNodeController(cfg, client, sw, host, ch, log.WithName("node"))
	go nodes.run(ctx)
	stopServices := startServices(ctx, cfg, client, addr, gw, log.WithName("services"))
	defer stopServices()

	isReady := func(ctx context.Context) error {
		if err := listenerErr.Load(); err != nil {
			return *err
		}
		return readiness(ctx, cfg, sw, watcher, nodes)
	}
	srv := cniserver.New(cniserver.Config{
		Bridge: IntegrationBridge, MTU: cfg.MTU,
		AnnotationTimeout: cfg.AnnotationTTL, InstallTimeout: cfg.PortInstallTimeout,
		NodeIP: addr.IP.Addr(), HostPorts: hostPortNAT(cfg, log),
		Installed: func(d time.Duration) { metrics.installed.Observe(d.Seconds()) },
	}, host, sw, watcher, isReady, log.WithName("cni"))
	defer srv.Close()
	if err := srv.SyncHostPorts(ctx); err != nil {
		return err
	}
	// Ports a restart left unfinished (Windows: waiting for their pod's vNIC).
	if err := srv.ResumeBinders(ctx); err != nil {
		return err
	}
	collector := srv.NewCollector(watcher.Exists, cfg.LeakCollect)
	collector.Collected = func(n int) { metrics.collected.Add(float64(n)) }
	go collector.Run(ctx)
	ln, err := cniserver.Listen(ctx, cfg.CNISocket)
	if err != nil {
		return err
	}
	httpSrv := cni.NewServer(metrics.instrument(srv.Handle))
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	if err := install.Plugin(pluginPath(cfg), cfg.CNIBinDir, cfg.CNIConfDir, cfg.CNISocket); err != nil {
		httpSrv.Close()
		return fmt.Errorf("installing the CNI plugin: %w", err)
	}
	if err := restrictPaths(cfg); err != nil {
		httpSrv.Close()
		return fmt.Errorf("restricting the CNI directories and the kubeconfig: %w", err)
	}
	log.Info("serving CNI", "socket", cfg.CNISocket, "took", time.Since(start).Round(time.Millisecond))
	// Ready as for CNI STATUS: OVSDB connected, the Node and pods listed, the management
	// port installed (the chassis registered: ovn-controller bound it). Alive while the
	// process answers: its loops have their own timeouts and retries.
	ready.Store(&isReady)

	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("CNI server: %w", err)
	}
	// Let calls in flight finish (an ADD may be waiting for ovn-controller), within bounds.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "stopping the CNI server")
	}
	return nil
}

// startup makes the node a chassis and repairs its own connectivity (setupChassis), with
// the node subnet where the host needs it (hostnet.SubnetHolder, Windows). That subnet
// comes from the host's existing set-up when there is one, and only otherwise from the
// API server: a Windows node that died half-way (the extension enabled, the host vNIC not
// yet bound) or came up with its ports unbound is offline until the repair, and would
// wait for the API server for ever.
func startup(ctx context.Context, cfg Config, sw *ovs.Switch, host hostnet.Host, client kubernetes.Interface, log logr.Logger) (contract.NodeChassisInfo, hostnet.NodeAddress, error) {
	var subnet netip.Prefix
	if sh, ok := host.(hostnet.SubnetHolder); ok {
		known, found, err := sh.KnownPodSubnet(ctx)
		if err != nil {
			log.Error(err, "reading the node subnet the host was set up with; asking the API server")
		}
		if found {
			subnet = known
			log.Info("repairing the node's connectivity with the subnet of its existing set-up first", "subnet", subnet)
		} else if subnet, err = waitNodeSubnet(ctx, client, cfg.NodeName, 2*time.Second, log); err != nil {
			return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, err
		}
	}
	if v, ok := host.(hostnet.Volatile); ok {
		if err := dropStalePorts(ctx, sw, v, contract.MgmtIfName(cfg.NodeName), log); err != nil {
			log.Error(err, "removing the ports of pod interfaces that are gone")
		}
	}
	ch, addr, err := setupChassis(ctx, cfg, sw, host, subnet)
	if err != nil {
		return contract.NodeChassisInfo{}, hostnet.NodeAddress{}, fmt.Errorf("chassis: %w", err)
	}
	return ch, addr, nil
}

func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	// An empty path means in-cluster, wherever the runtime mounted the ServiceAccount.
	rc, err := kubeconf.Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "ovnt-node"
	return kubernetes.NewForConfig(rc)
}

// pluginPath is the ovnt-cni to install: the configured one, else the one shipped beside
// the agent's own binary.
func pluginPath(cfg Config) string {
	if cfg.CNIPlugin != "" {
		return cfg.CNIPlugin
	}
	self, err := os.Executable()
	if err != nil {
		return cni.PluginType
	}
	return filepath.Join(filepath.Dir(self), filepath.Base(cni.PluginType)+filepath.Ext(self))
}

// hostPortNAT is where pods' host ports open: a table of the node's own, which also
// rewrites connections arriving from outside; nil where the system has none (Windows).
func hostPortNAT(cfg Config, log logr.Logger) localnat.NAT {
	nat, err := localnat.New(localnat.Config{MgmtIface: contract.MgmtIfName(cfg.NodeName), Table: HostPortTable, Incoming: true})
	if err != nil {
		log.Info("pods with a hostPort cannot start on this node", "reason", err.Error())
		return nil
	}
	return nat
}

// HostPortTable is the nf_tables table that holds the node's host ports.
const HostPortTable = "ovnt-hostport"
