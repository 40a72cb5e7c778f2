package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// Switch is what the controller reads from the local Open_vSwitch database; *ovs.Switch
// implements it.
type Switch interface {
	// BridgePorts returns the cached ports of the bridge; an error if there is no such
	// bridge.
	BridgePorts(ctx context.Context, bridge string) ([]ovs.BridgePort, error)
	// OnPortChange registers fn, called (without blocking it) after every change of the
	// bridges, ports and interfaces in the cache.
	OnPortChange(fn func())
}

// Config says which bridge the controller keeps and with what.
type Config struct {
	Bridge       string // br-phy
	Uplink       string // the physical interface, a port of Bridge
	LocalnetPort string // contract.LocalnetPort(node)
	MAC          net.HardwareAddr
	IP           netip.Addr
	Tunnel       Tunnel
	// HostPort is the name of the bridge's port that is the host's interface, holding MAC
	// and IP (Ports.Host): empty for the bridge's own interface, LOCAL (Linux); the host
	// vNIC's internal port on Windows (hostnet.NodeAddress.HostPort).
	HostPort string
	// Resync is how often the flows are checked against the bridge and put back even when
	// nothing changed in the database (someone deleted them with ovs-ofctl); default 60s.
	Resync time.Duration
}

// DefaultResync is Config.Resync's default.
const DefaultResync = 60 * time.Second

// syncTimeout bounds one Sync: it waits for a connection to ovs-vswitchd meanwhile. The
// openflow client keeps the set and installs it on its own when the connection comes back,
// so giving up here loses nothing; the retry is a backstop.
const syncTimeout = 10 * time.Second

// The queue's keys. Database events only enqueue keyPorts, whose sync talks to the switch
// only if the desired flows changed; the timer enqueues keyResync, whose sync always reads
// the bridge back (a flow deleted by hand changes nothing in the database).
const (
	keyPorts  = "ports"
	keyResync = "resync"
)

// Controller makes the gateway bridge hold Flows for the ports it has now, and keeps it so.
type Controller struct {
	cfg  Config
	sw   Switch
	of   openflow.Bridge
	log  logr.Logger
	loop *reconcile.Loop[string]

	mu        sync.Mutex
	nodePorts []NodePort

	// Sync goroutine only.
	applied string // the flows of the last successful Sync, as text; "" after a failure
	waiting string // why there are no flows yet, as last logged
}

// New returns a controller for cfg's bridge, reading the database through sw and writing
// flows through of. Nothing happens until Run.
func New(cfg Config, sw Switch, of openflow.Bridge, log logr.Logger) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	// Retries back off up to the resync period, not beyond: a long outage of ovs-vswitchd
	// must not push the next attempt past the periodic check.
	c := &Controller{cfg: cfg, sw: sw, of: of, log: log}
	c.loop = reconcile.New("gateway-flows", c.syncAndReschedule, log.WithValues("bridge", cfg.Bridge),
		reconcile.Options{MinRetry: 100 * time.Millisecond, MaxRetry: cfg.Resync})
	return c
}

// syncAndReschedule is the loop's sync: after a successful periodic check, the next one is
// due a resync period later (a failed one is retried with backoff instead).
func (c *Controller) syncAndReschedule(ctx context.Context, key string) error {
	if err := c.sync(ctx, key); err != nil {
		return err
	}
	if key == keyResync {
		c.loop.AddAfter(keyResync, c.cfg.Resync)
	}
	return nil
}

// SetNodePorts is the hook for Services (node/internal/services calls it): from now on the
// bridge sends nps to the gateway router. It replaces the previous set and returns at once;
// the flows follow in the background.
func (c *Controller) SetNodePorts(nps []NodePort) {
	nps = slices.Clone(nps)
	slices.SortFunc(nps, NodePort.Compare)
	nps = slices.Compact(nps)
	c.mu.Lock()
	c.nodePorts = nps
	c.mu.Unlock()
	c.loop.Add(keyPorts)
}

// Run syncs until ctx ends. The bridge keeps its flows afterwards: a restarted agent finds
// them in place and changes nothing.
func (c *Controller) Run(ctx context.Context) {
	c.sw.OnPortChange(func() { c.loop.Add(keyPorts) })
	c.loop.Add(keyResync)
	c.loop.Run(ctx)
}

// sync computes the flows from the cached ports and, if they changed or key is keyResync,
// makes the bridge hold them.
func (c *Controller) sync(ctx context.Context, key string) error {
	bridgePorts, err := c.sw.BridgePorts(ctx, c.cfg.Bridge)
	if err != nil {
		return err
	}
	ports, err := findPorts(bridgePorts, c.cfg.Uplink, c.cfg.LocalnetPort, c.cfg.HostPort)
	var wait errNotReady
	if errors.As(err, &wait) {
		// ovs-vswitchd numbers the port soon and the cache event brings us back. Until
		// then the bridge keeps what it has (its NORMAL flow, or our flows of before).
		if wait.reason != c.waiting {
			c.log.Info("waiting before installing the gateway flows", "reason", wait.reason)
			c.waiting = wait.reason
		}
		return nil
	}
	if err != nil {
		return err
	}
	c.waiting = ""
	c.mu.Lock()
	nps := c.nodePorts
	c.mu.Unlock()
	flows := Flows(Params{Ports: ports, MAC: c.cfg.MAC, IP: c.cfg.IP, Tunnel: c.cfg.Tunnel, NodePorts: nps})
	text := flowsText(flows)
	if key == keyPorts && text == c.applied {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if err := c.of.Sync(sctx, Cookie, flows); err != nil {
		c.applied = ""
		return fmt.Errorf("bridge %s: %w", c.cfg.Bridge, err)
	}
	if text != c.applied {
		c.log.Info("gateway flows in place", "bridge", c.cfg.Bridge, "flows", len(flows),
			"uplinkPort", ports.Uplink, "patchPort", ports.Patch, "hostPort", ports.host(), "nodePorts", len(nps))
	}
	c.applied = text
	return nil
}

// flowsText is a set of flows as comparable text.
func flowsText(flows []openflow.Flow) string {
	lines := make([]string, len(flows))
	for i := range flows {
		lines[i] = flows[i].String()
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
