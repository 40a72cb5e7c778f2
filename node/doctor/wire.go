package doctor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/node/kubeconf"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/sbdb"
)

// Config is the part of the agent's configuration (its flags) the doctor needs.
type Config struct {
	NodeName, Kubeconfig                              string
	OVSAddress, OVSRunDir                             string
	SBAddress, SBClientKey, SBClientCert, SBCACert    string
	UplinkIface, GatewayBridge, CNIBinDir, CNIConfDir string
	OVSDBListen, OpenFlowListen                       string
}

// FromConfig connects what the agent configured by cfg uses, for Run: the local
// Open_vSwitch database (within timeout), the host's HNS, the bridges' OpenFlow sockets, the
// Southbound database with the chassis' TLS files, and the API server for the Node. close
// releases the connections.
func FromConfig(ctx context.Context, cfg Config, timeout time.Duration) (n Node, close func()) {
	n = Node{
		Name: cfg.NodeName, UplinkIface: cfg.UplinkIface, GatewayBridge: cfg.GatewayBridge,
		CNIBinDir: cfg.CNIBinDir, CNIConfDir: cfg.CNIConfDir, Network: "ovn-transparent",
		OVSDBListen: cfg.OVSDBListen, OpenFlowListen: cfg.OpenFlowListen,
	}
	n.HNS, n.IP, n.ExeSuffix = Host()
	closers := []func(){}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if sw, err := ovs.Connect(cctx, cfg.OVSAddress, logr.Discard(), nil); err != nil {
		n.SwitchErr = fmt.Errorf("%s: %w", cfg.OVSAddress, err)
	} else {
		n.Switch = sw
		closers = append(closers, sw.Close)
	}
	n.OpenFlow = func(ctx context.Context, bridge string) error {
		target := "unix:" + filepath.Join(cfg.OVSRunDir, bridge+".mgmt")
		var last atomic.Value
		last.Store("")
		c, err := openflow.New(target, openflow.Options{Logf: func(format string, args ...any) { last.Store(fmt.Sprintf(format, args...)) }})
		if err != nil {
			return err
		}
		defer c.Close()
		// A cookie no one uses: the dump proves the switch answers and changes nothing.
		if _, err := c.Dump(ctx, rand.Uint64()|1<<63); err != nil {
			return fmt.Errorf("%s: %w (%s)", target, err, last.Load())
		}
		return nil
	}
	// A remote chassis has no SB identity of its own (its ovn-controller's is on the
	// controllers' host): an ssl: SB would refuse it, so the SB is not asked from here.
	remoteWithoutCert := cfg.OVSDBListen != "" && cfg.SBClientCert == "" && strings.HasPrefix(cfg.SBAddress, "ssl:")
	if cfg.SBAddress != "" && !remoteWithoutCert {
		n.SBChassis = func(ctx context.Context) ([]string, error) {
			dbModel, err := sbdb.FullDatabaseModel()
			if err != nil {
				return nil, err
			}
			var ch sbdb.Chassis
			c, err := ovsdb.New(ctx, dbModel, ovsdb.Config{
				Remotes: cfg.SBAddress, PrivateKeyFile: cfg.SBClientKey, CertificateFile: cfg.SBClientCert, CACertFile: cfg.SBCACert,
				AllowFollower: true, Tables: []ovsdb.Table{{Model: &ch, Fields: []interface{}{&ch.Name}}},
			})
			if err != nil {
				return nil, err
			}
			defer c.Close()
			var rows []sbdb.Chassis
			if err := c.List(ctx, &rows); err != nil {
				return nil, err
			}
			names := make([]string, 0, len(rows))
			for _, r := range rows {
				names = append(names, r.Name)
			}
			return names, nil
		}
	}
	n.Runtime = func(ctx context.Context) (string, error) {
		rc, err := kubeconf.Config(cfg.Kubeconfig)
		if err != nil {
			return "", err
		}
		rc.UserAgent = "ovnt-node-doctor"
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return "", err
		}
		node, err := client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return node.Status.NodeInfo.ContainerRuntimeVersion, nil
	}
	return n, func() {
		for _, c := range closers {
			c()
		}
	}
}
