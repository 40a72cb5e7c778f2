package remotectl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/node/chassisrelay"
)

// PIDFile is ovn-controller's pid file in its run directory, beside the relays' sockets
// (chassisrelay.DBSocket, chassisrelay.OFSocket) and its control socket.
const PIDFile = "ovn-controller.pid"

// Config is how a Supervisor runs each node's controller.
type Config struct {
	// RunDir holds one directory per node, <RunDir>/<node>: the controller's OVS_RUNDIR and
	// OVN_RUNDIR, with the relays' sockets, its pid file and its control socket.
	RunDir string
	// OVSDBPort and OpenFlowPort are the node's listeners (ovnt-node --ovsdb-listen,
	// --openflow-listen); OpenFlowPort 0 makes no OpenFlow relay.
	OVSDBPort, OpenFlowPort int
	// Plaintext connects the relays to the node over TCP instead of TLS.
	Plaintext bool
	// OVNController is the ovn-controller binary; empty: ovn-controller in $PATH.
	OVNController string
	// Command is the controller's command for spec in dir; nil: DefaultCommand of
	// OVNController.
	Command func(spec Spec, dir string) *exec.Cmd
	// MinBackoff and MaxBackoff bound the wait before a controller that exited is started
	// again (doubling from MinBackoff; back to it after a run of a minute). Zero: 1 s, 30 s.
	MinBackoff, MaxBackoff time.Duration
	// StopTimeout is how long a controller has to exit after SIGTERM before SIGKILL. Zero: 10 s.
	StopTimeout time.Duration
	Logger      logr.Logger
}

// DefaultCommand runs ovn-controller (the binary bin) on the relay's database socket with
// spec's files for the SB, logging to standard error, in dir.
func DefaultCommand(bin string, spec Spec, dir string) *exec.Cmd {
	cmd := exec.Command(bin, "unix:"+filepath.Join(dir, chassisrelay.DBSocket),
		"--pidfile="+filepath.Join(dir, PIDFile), "-vconsole:info", "-vsyslog:off", "-vfile:off",
		"-p", spec.KeyFile, "-c", spec.CertFile, "-C", spec.CAFile)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd
}

// Supervisor keeps one controller running for each node it was given with Set.
type Supervisor struct {
	cfg Config

	mu    sync.Mutex
	nodes map[string]*controller
	// stopping has the done channel of each removed controller: one set again starts only
	// once its predecessor has stopped and removed the run directory.
	stopping map[string]chan struct{}
	wg       sync.WaitGroup
}

// controller is one node's supervised controller.
type controller struct {
	spec   Spec
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	pid int // of the running child; 0 while there is none
}

// NewSupervisor returns a Supervisor with no controllers.
func NewSupervisor(cfg Config) *Supervisor {
	if cfg.OVNController == "" {
		cfg.OVNController = "ovn-controller"
	}
	if cfg.Command == nil {
		cfg.Command = func(spec Spec, dir string) *exec.Cmd { return DefaultCommand(cfg.OVNController, spec, dir) }
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	return &Supervisor{cfg: cfg, nodes: map[string]*controller{}, stopping: map[string]chan struct{}{}}
}

// Set makes spec.Node's controller run with spec: started if there is none, restarted if it
// runs with another spec, left alone otherwise.
func (s *Supervisor) Set(spec Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.nodes[spec.Node]
	if old != nil && old.spec == spec {
		return
	}
	prev := s.stopping[spec.Node]
	delete(s.stopping, spec.Node)
	if old != nil {
		s.cfg.Logger.Info("restarting the controller with new settings", "node", spec.Node, "address", spec.Address)
		old.cancel()
		prev = old.done
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{spec: spec, cancel: cancel, done: make(chan struct{})}
	s.nodes[spec.Node] = c
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.supervise(ctx, c, prev)
	}()
}

// Remove stops node's controller, if any, and removes its run directory (asynchronously; a
// later Set of the same node waits for it).
func (s *Supervisor) Remove(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.nodes[node]; c != nil {
		s.cfg.Logger.Info("stopping the controller", "node", node)
		c.cancel()
		delete(s.nodes, node)
		s.stopping[node] = c.done
	}
}

// StopAll stops every controller and waits until they have exited.
func (s *Supervisor) StopAll() {
	s.mu.Lock()
	for name, c := range s.nodes {
		c.cancel()
		delete(s.nodes, name)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Running returns the pid of each node's running controller, 0 for one that is not running
// (starting or waiting to restart).
func (s *Supervisor) Running() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.nodes))
	for name, c := range s.nodes {
		c.mu.Lock()
		out[name] = c.pid
		c.mu.Unlock()
	}
	return out
}

func (c *controller) setPID(pid int) {
	c.mu.Lock()
	c.pid = pid
	c.mu.Unlock()
}

// supervise runs c until ctx ends, after the controller it replaces (prev) has ended.
func (s *Supervisor) supervise(ctx context.Context, c *controller, prev <-chan struct{}) {
	defer close(c.done)
	if prev != nil {
		<-prev
	}
	lg := s.cfg.Logger.WithValues("node", c.spec.Node)
	dir := filepath.Join(s.cfg.RunDir, c.spec.Node)
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			lg.Error(err, "removing the run directory")
		}
	}()
	backoff := s.cfg.MinBackoff
	for {
		start := time.Now()
		err := s.runOnce(ctx, c, dir, lg)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = s.cfg.MinBackoff
		}
		lg.Error(err, "the controller ended; starting it again", "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

// relays are the chassis relays of spec, listening in dir.
func (s *Supervisor) relays(spec Spec, dir string, lg logr.Logger) ([]*chassisrelay.Relay, error) {
	var tlsCfg *ovsdb.Config
	if !s.cfg.Plaintext {
		tlsCfg = &ovsdb.Config{PrivateKeyFile: spec.KeyFile, CertificateFile: spec.CertFile, CACertFile: spec.CAFile}
	}
	relays, err := chassisrelay.NodeRelays(dir, spec.Address, s.cfg.OVSDBPort, s.cfg.OpenFlowPort, tlsCfg, 0)
	for _, r := range relays {
		r.Logger = lg
	}
	return relays, err
}

// runOnce starts the relays and the controller and waits until the controller exits, a relay
// fails or ctx ends; then it stops them all.
func (s *Supervisor) runOnce(ctx context.Context, c *controller, dir string, lg logr.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	relays, err := s.relays(c.spec, dir, lg)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	relayErr := make(chan error, len(relays))
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.Run(rctx)
			if err == nil && rctx.Err() == nil {
				err = errors.New("relay ended")
			}
			relayErr <- err
		}()
	}
	// ovn-controller backs off when its sockets are missing: have them first.
	for _, r := range relays {
		for {
			if _, err := os.Stat(r.Listen); err == nil {
				break
			}
			select {
			case err := <-relayErr:
				return fmt.Errorf("relay: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	cmd := s.cfg.Command(c.spec, dir)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "OVS_RUNDIR="+dir, "OVN_RUNDIR="+dir), cmd.Env...)
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	c.setPID(cmd.Process.Pid)
	defer c.setPID(0)
	lg.Info("controller started", "pid", cmd.Process.Pid, "address", c.spec.Address)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return fmt.Errorf("controller exited: %v", err)
	case err := <-relayErr:
		stop(cmd, exited, s.cfg.StopTimeout)
		return fmt.Errorf("relay: %w", err)
	case <-ctx.Done():
		stop(cmd, exited, s.cfg.StopTimeout)
		lg.Info("controller stopped")
		return ctx.Err()
	}
}

// stop sends cmd SIGTERM, and SIGKILL if it has not exited after timeout; it returns once it
// has exited.
func stop(cmd *exec.Cmd, exited <-chan error, timeout time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-exited
	}
}
