package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/health"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/controller"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
)

// setUpLogging sends klog (which client-go and the controllers use) to standard error at
// the given verbosity.
func setUpLogging(verbosity int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", strconv.Itoa(verbosity))
}

// runMaster connects to the API server and the NB, then runs the controllers until ctx is
// done, or, with leader election, while this master holds the Lease.
func runMaster(ctx context.Context, cfg Config, log logr.Logger) error {
	restCfg, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = controller.Component
	// client-go's default of 5 requests per second would cap pod start-up at 5 pods per
	// second cluster-wide: every pod costs the master one annotation patch.
	restCfg.QPS, restCfg.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	// Health and metrics first: while the NB is out of reach the master is alive, not ready.
	srv := health.New()
	var started atomic.Pointer[controller.Controller]
	srv.AddLiveness("workqueue", func() error {
		if c := started.Load(); c != nil {
			return c.Live()
		}
		return nil
	})
	srv.AddReadiness("controller", func() error {
		if c := started.Load(); c != nil {
			return c.Ready()
		}
		return errors.New("connecting to the NB")
	})
	if err := srv.Serve(ctx, cfg.HealthAddress, func(err error) { log.Error(err, "Health endpoint") }); err != nil {
		return err
	}
	nbCfg := ovsdb.Config{
		Remotes:         cfg.NBAddress,
		PrivateKeyFile:  cfg.NBClientKey,
		CertificateFile: cfg.NBClientCert,
		CACertFile:      cfg.NBCACert,
		InactivityProbe: cfg.NBInactivityProbe,
		ServerName:      cfg.NBServerName,
		Logger:          log.WithName("nb"),
		Metrics:         srv.Registry,
		MetricsPrefix:   "ovnt_master_nb",
	}
	overflow := nb.WatchOverflow(&nbCfg)
	nbc, err := nb.Connect(ctx, nbCfg)
	if err != nil {
		return err
	}
	defer nbc.Close()
	recorder, stopEvents := controller.NewEventRecorder(kube)
	defer stopEvents()
	ctrl, err := controller.New(controller.Config{
		ClusterCIDR:    cfg.ClusterCIDR,
		NodeSubnetBits: cfg.NodeSubnetBits,
		JoinSubnet:     cfg.JoinSubnet,
		ResyncPeriod:   cfg.ResyncPeriod,
		Workers:        cfg.Workers,
		SyncTimeout:    cfg.SyncTimeout,

		ServiceCIDRs:       cfg.ServiceCIDRs,
		AllowedExternalIPs: cfg.AllowedExternalIPs,
		ServiceLimits:      cfg.ServiceLimits,
		MaxServiceVIPs:     cfg.MaxServiceVIPs,
		MaxPolicySize:      cfg.MaxPolicySize,
		NBOverflow:         overflow,
		ControlPlane:       netpol.ControlPlane{Addresses: cfg.ControlPlaneAddresses, Ports: cfg.ControlPlanePorts},
	}, kube, nbc, recorder, log)
	if err != nil {
		return err
	}
	if err := ctrl.RegisterMetrics(srv.Registry); err != nil {
		return err
	}
	started.Store(ctrl)
	if !cfg.LeaderElect {
		return ctrl.Run(ctx)
	}
	return runAsLeader(ctx, cfg, kube, log, ctrl.Run)
}

func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (or give --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// runAsLeader runs run while this process holds the Lease. Losing the Lease is an error: the
// process exits and is restarted as a candidate, rather than risk two masters writing.
func runAsLeader(ctx context.Context, cfg Config, kube kubernetes.Interface, log logr.Logger, run func(context.Context) error) error {
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaderElectNamespace, Name: cfg.LeaderElectName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            cfg.LeaderElectName,
		Callbacks: leaderelection.LeaderCallbacks{
			// The leader's context ends when the Lease is lost.
			OnStartedLeading: func(leaderCtx context.Context) { leading <- leaderCtx },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != id {
					log.Info("Another master leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	electionCtx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		le.Run(electionCtx)
	}()
	select {
	case <-electionDone: // never led; le.Run only gives up when ctx is done
		return nil
	case leaderCtx := <-leading:
		log.Info("Leading", "identity", id)
		err := run(leaderCtx)
		stopElection()
		<-electionDone // releases the Lease
		if err != nil {
			return err
		}
		if ctx.Err() == nil {
			return errors.New("lost the leader election Lease")
		}
		return nil
	}
}
