//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The ports a remote chassis' node listens on for its ovn-controller (docs/remote-chassis.md):
// the Open_vSwitch database (ovsdb-server's pssl: remote) and OpenFlow to br-int (a passive
// controller target of the bridge). 6640 and 6653 are the IANA ports of OVSDB and OpenFlow.
const (
	RemoteOVSDBPort    = 6640
	RemoteOpenFlowPort = 6653
)

// RemoteControllerOptions configure StartRemoteController.
type RemoteControllerOptions struct {
	// Relay is the ovnt-node binary, whose chassis-relay command carries ovn-controller's
	// database and OpenFlow connections from Dir to the node's listeners.
	Relay string
	// Cert is what the controller presents to the SB and, through the relay, to the node's
	// listeners; CAFile checks both servers. Default: the node's chassis certificate
	// (Node.SBCert).
	Cert Cert
}

// RemoteController is the ovn-controller of a remote-chassis node, on a "controller host" of
// its own: a network namespace on the underlay, reaching the node only over the network, as
// a Linux host runs the ovn-controller of a Windows node. Its OVS_RUNDIR, Dir, holds the
// relay's db.sock and br-int.mgmt (node/chassisrelay), carried over TLS to the node's
// listeners at RemoteOVSDBPort and RemoteOpenFlowPort, which ovnt-node opens.
type RemoteController struct {
	Node  *Node
	Netns string // r.Name("rc-" + node)
	IP    string // on the underlay
	Dir   string
	// Cert is what the controller and its relay present (RemoteControllerOptions.Cert).
	Cert Cert

	opts    RemoteControllerOptions
	run     *Run
	ulNetns string
	ulPort  string

	mu                sync.Mutex
	relay, controller *Proc
}

// StartRemoteController puts a controller host for node n on the underlay and starts the
// relay and ovn-controller there. The node must have been started with NodeOptions.Listen.
// It returns once ovn-controller answers on its control socket; the chassis registers once
// the agent has written the chassis settings and opened the listeners.
func (r *Run) StartRemoteController(ctx context.Context, n *Node, opts RemoteControllerOptions) (*RemoteController, error) {
	if n.Listen.CertFile == "" {
		return nil, fmt.Errorf("harness: node %s has no listeners (NodeOptions.Listen)", n.Name)
	}
	if opts.Cert.CertFile == "" {
		opts.Cert = n.SBCert
	}
	u, err := r.underlay(ctx)
	if err != nil {
		return nil, err
	}
	short := "rc-" + n.Name
	host, err := u.hostNumber(short)
	if err != nil {
		return nil, err
	}
	rc := &RemoteController{Node: n, Netns: r.Name(short), IP: nodeIP(host), Dir: r.Path(short), Cert: opts.Cert, opts: opts, run: r}
	if err := os.Mkdir(rc.Dir, 0o755); err != nil {
		return nil, err
	}
	success := false
	defer func() {
		if !success {
			rc.Stop()
		}
	}()
	if _, err := r.AddNetns(short); err != nil {
		return nil, err
	}
	port := fmt.Sprintf("ul-n%d", host)
	if err := u.attach(ctx, rc.Netns, port, fmt.Sprintf("0a:58:ac:12:00:%02x", host), rc.IP+underlayPrefix); err != nil {
		Exec(context.Background(), u.netns, "ip", "link", "del", port)
		return nil, fmt.Errorf("harness: controller host of %s: %w", n.Name, err)
	}
	rc.ulNetns, rc.ulPort = u.netns, port
	if err := rc.Start(ctx); err != nil {
		return nil, err
	}
	success = true
	return rc, nil
}

// Start starts the relay and ovn-controller (again, after Kill). The relay first: with no
// socket at br-int.mgmt ovn-controller would back off before it retried.
func (rc *RemoteController) Start(ctx context.Context) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.controller != nil && !rc.controller.isDone() {
		return fmt.Errorf("harness: the remote ovn-controller of %s is running", rc.Node.Name)
	}
	// A killed relay leaves its sockets; the new one would replace them, but waiting for
	// them to appear needs them gone first.
	socks := []string{filepath.Join(rc.Dir, "db.sock"), filepath.Join(rc.Dir, "br-int.mgmt")}
	for _, s := range socks {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	relay, err := rc.run.Start(ProcSpec{
		Name: "rc-" + rc.Node.Name + "-chassis-relay", Netns: rc.Netns, Path: rc.opts.Relay,
		Args: []string{"chassis-relay", "--rundir", rc.Dir, "--node-address", rc.Node.IP,
			"--ovsdb-port", strconv.Itoa(RemoteOVSDBPort), "--openflow-port", strconv.Itoa(RemoteOpenFlowPort),
			"--client-cert", rc.opts.Cert.CertFile, "--client-key", rc.opts.Cert.KeyFile,
			"--ca-cert", rc.opts.Cert.CAFile, "--log-level", "2"},
	})
	if err != nil {
		return err
	}
	if err := waitDaemon(ctx, rc.run, relay, "the chassis relay of "+rc.Node.Name, func(context.Context) error {
		for _, s := range socks {
			if _, err := os.Stat(s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		relay.Stop()
		return err
	}
	// -p/-c/-C are for the SB: the node's database is the relay's unix socket (chassisrelay
	// says why it cannot be ssl: on OVN 23.03). The node has no SSL row, which would win.
	controller, err := rc.run.startDaemon(ctx, ovsDaemon{
		name: "rc-" + rc.Node.Name + "-ovn-controller", bin: "ovn-controller", netns: rc.Netns, dir: rc.Dir,
		args: []string{"unix:" + socks[0], "-p", rc.opts.Cert.KeyFile, "-c", rc.opts.Cert.CertFile, "-C", rc.opts.Cert.CAFile},
	})
	if err != nil {
		relay.Stop()
		return err
	}
	rc.relay, rc.controller = relay, controller
	go rc.supervise(controller)
	return nil
}

// supervise starts the relay and ovn-controller again if ovn-controller dies on its own
// (Node.superviseController says why it does), and records the crash loudly.
func (rc *RemoteController) supervise(p *Proc) {
	<-p.Done()
	if !p.Crashed() || rc.run.isClosed() {
		return
	}
	rc.run.noteCrash(fmt.Sprintf("remote ovn-controller of %s (pid %d) exited on its own (%v); its log ends: %s; restarting it",
		rc.Node.Name, p.Pid(), p.Err(), logTail(filepath.Join(rc.run.LogDir, "rc-"+rc.Node.Name+"-ovn-controller.log"), 3)))
	rc.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := rc.Start(ctx); err != nil {
		rc.run.noteCrash(fmt.Sprintf("remote ovn-controller of %s could not be restarted: %v", rc.Node.Name, err))
	}
}

// Kill SIGKILLs ovn-controller and the relay, as a crash of the controller host would; the
// node's flows stay (br-int is fail_mode=secure) until Start brings them back.
func (rc *RemoteController) Kill() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range []*Proc{rc.controller, rc.relay} {
		if p != nil {
			p.Kill()
		}
	}
}

// Cut takes the controller host's underlay link down (up again with cut false), as a
// network failure between it and the node would: both daemons keep running, and their
// connections to the node and the SB time out or resume on their own.
func (rc *RemoteController) Cut(ctx context.Context, cut bool) error {
	state := "up"
	if cut {
		state = "down"
	}
	_, err := Exec(ctx, rc.ulNetns, "ip", "link", "set", rc.ulPort, state)
	return err
}

// OVNController is the running (or last) ovn-controller.
func (rc *RemoteController) OVNController() *Proc {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.controller
}

// AppCtl runs ovs-appctl against the remote ovn-controller.
func (rc *RemoteController) AppCtl(ctx context.Context, args ...string) (string, error) {
	p := rc.OVNController()
	if p == nil {
		return "", fmt.Errorf("harness: no remote ovn-controller for %s", rc.Node.Name)
	}
	sock := filepath.Join(rc.Dir, fmt.Sprintf("ovn-controller.%d.ctl", p.Pid()))
	return ovsCtl(ctx, nil, "ovs-appctl", append([]string{"--timeout=30", "-t", sock}, args...)...)
}

// Stop stops both daemons and removes the controller host. Idempotent.
func (rc *RemoteController) Stop() error {
	rc.mu.Lock()
	procs := []*Proc{rc.controller, rc.relay}
	rc.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			p.Stop()
		}
	}
	var errs []error
	if rc.ulPort != "" {
		if _, err := Exec(context.Background(), rc.ulNetns, "ip", "link", "del", rc.ulPort); err != nil {
			errs = append(errs, err)
		}
		rc.ulPort = ""
	}
	if _, err := os.Stat("/run/netns/" + rc.Netns); err == nil {
		errs = append(errs, deleteNetns(rc.Netns))
	}
	return errors.Join(append(errs, os.RemoveAll(rc.Dir))...)
}
