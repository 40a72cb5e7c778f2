// Package cniserver is the node agent's side of the CNI protocol (internal/cni): it answers
// the ADD, DEL, CHECK, GC and STATUS calls ovnt-cni forwards. The work per call is shared by
// every OS: the pod's addresses come from the master's annotation, the port goes on br-int
// through libovsdb, and only the interface itself is made by hostnet.Host.
package cniserver

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// Interface external_ids the agent writes on a pod's port besides OVN's own, so DEL and GC
// find the port from the CNI attachment without any state of their own.
const (
	KeyIfaceID     = "iface-id"          // OVN: the logical switch port, contract.PodPort
	KeyAttachedMAC = "attached-mac"      // OVN: the pod's MAC
	KeyIfaceIDVer  = contract.IfaceIDVer // OVN: binds only the pod with this UID (the LSP option the master sets)
	KeyContainerID = "ovnt-container-id"
	KeyIfName      = "ovnt-ifname"
	KeySandbox     = "ovnt-sandbox" // the pod's network namespace path
	KeyPod         = "ovnt-pod"     // namespace/name, for the operator
)

// Config is what the server needs to know about its node.
type Config struct {
	Bridge string // the integration bridge, br-int
	MTU    int
	// AnnotationTimeout bounds ADD's wait for the master's annotation; InstallTimeout its
	// wait for ovn-controller to install the port.
	AnnotationTimeout time.Duration
	InstallTimeout    time.Duration
	// BindTimeout bounds the wait, after ADD, for a pod interface that appears only once
	// the sandbox runs (hostnet.LateBinder, Windows); 5 minutes if 0.
	BindTimeout time.Duration
	// NodeIP is where pods' host ports open when the runtime names no host IP.
	NodeIP netip.Addr
	// Installed, if set, is told how long ovn-controller took to install a port ADD
	// created (from the port's write to ovn-installed: its flows are in place). Not on
	// systems whose ports are bound after ADD (hostnet.LateBinder), where ADD does not wait.
	Installed func(time.Duration)
	// HostPorts holds the node's host port rules (the portMappings capability); nil on
	// systems without an implementation, where a pod with a hostPort fails to start.
	HostPorts localnat.NAT
}

// PodNetworks gives a pod's network as the master allocated it.
type PodNetworks interface {
	// Network waits until ctx is done for the pod's annotation and returns it with the
	// pod's UID; see pods.Watcher.
	Network(ctx context.Context, p cni.PodArgs) (contract.PodNetwork, string, error)
}

// Server answers CNI calls.
type Server struct {
	cfg   Config
	host  hostnet.Host
	sw    *ovs.Switch
	pods  PodNetworks
	ready func(context.Context) error
	log   logr.Logger
	locks keyedMutex

	bg       context.Context // the workers' (bind.go), until Close
	bgCancel context.CancelFunc
	bmu      sync.Mutex
	binders  map[string]*binder // by port name
}

// New returns a server. ready says whether the node can serve ADDs now (STATUS).
// Close stops the workers it started.
func New(cfg Config, host hostnet.Host, sw *ovs.Switch, pods PodNetworks, ready func(context.Context) error, log logr.Logger) *Server {
	if cfg.BindTimeout == 0 {
		cfg.BindTimeout = 5 * time.Minute
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, host: host, sw: sw, pods: pods, ready: ready, log: log, locks: keyedMutex{m: map[string]*lockEntry{}},
		bg: bg, bgCancel: cancel, binders: map[string]*binder{}}
}

// Handle serves one request; it is a cni.Handler.
func (s *Server) Handle(ctx context.Context, req cni.Request) ([]byte, error) {
	start := time.Now()
	conf, err := cni.ParseNetConf(req.StdinData)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(cni.SupportedVersions, conf.CNIVersion) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("cniVersion %q: this agent speaks %v", conf.CNIVersion, cni.SupportedVersions), "")
	}
	var out []byte
	switch req.Command {
	case "ADD":
		out, err = s.add(ctx, req, conf)
	case "DEL":
		err = s.del(ctx, req)
	case "CHECK":
		err = s.check(ctx, req, conf)
	case "GC":
		err = s.gc(ctx, conf)
	case "STATUS":
		if rerr := s.ready(ctx); rerr != nil {
			err = types.NewError(types.ErrPluginNotAvailable, "the node is not ready for pods: "+rerr.Error(), "")
		}
	default:
		err = types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND %q", req.Command), "")
	}
	log := s.log.WithValues("command", req.Command, "container", req.ContainerID, "took", time.Since(start).Round(time.Millisecond))
	if err != nil {
		log.Info("CNI call failed", "error", err.Error())
		return nil, err
	}
	log.V(2).Info("CNI call done")
	return out, nil
}

// required checks the CNI variables a command cannot do without.
func required(req cni.Request, ifName bool) error {
	missing := ""
	switch {
	case req.ContainerID == "":
		missing = "CNI_CONTAINERID"
	case ifName && req.IfName == "":
		missing = "CNI_IFNAME"
	}
	if missing != "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables, missing+" is empty", "")
	}
	return nil
}

// keyedMutex serializes the calls about one container: a runtime may retry an ADD, or send
// a DEL, while the first call is still waiting for the master or ovn-controller.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	e := k.m[key]
	if e == nil {
		e = &lockEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
