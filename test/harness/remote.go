//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// Kube, when set, makes the controller host run `ovnt-node remote-controllers` (the
	// manager, node/remotectl) instead of the relay and ovn-controller: the manager finds the
	// node remote by its label ovn-transparent.io/remote-chassis=true, which the harness
	// sets with Kube's client, and its certificate in a directory of <node>.crt, <node>.key
	// and ca.crt made from Cert.
	Kube *Kube
	// Kubeconfig returns the kubeconfig the manager uses from the controller host's network
	// namespace; nil: Kube's admin one (Kube.ExposeInNetns).
	Kubeconfig func(ctx context.Context, netns string) (string, error)
	// BridgeRemote: the node's agent writes external_ids:ovn-bridge-remote (ovnt-node
	// --ovn-bridge-remote), and ovn-controller opens its OpenFlow connections to the node's
	// listener itself; the relay carries only the database. Needs OVN 24.09 or later
	// (OVNHasBridgeRemote).
	BridgeRemote bool
}

// OVNHasBridgeRemote reports whether the run's ovn-controller has ovn-bridge-remote (OVN
// 24.09 and later): the pinned rootfs's 26.03 has it, Debian 12's 23.03 does not.
func OVNHasBridgeRemote() bool {
	sel, _ := OVNSelected()
	return sel
}

// openFlowPort is the relay's --openflow-port: 0 (no OpenFlow relay) with BridgeRemote.
func (o RemoteControllerOptions) openFlowPort() string {
	if o.BridgeRemote {
		return "0"
	}
	return strconv.Itoa(RemoteOpenFlowPort)
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

	// With RemoteControllerOptions.Kube: the manager's kubeconfig and certificate directory.
	kubeconfig, certDir string

	mu                         sync.Mutex
	relay, controller, manager *Proc
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
	if opts.Kube != nil {
		// The manager's --rundir is <run>/rcm; it makes (and removes) the node's directory.
		rc.Dir = r.Path("rcm", n.Name)
	}
	if err := os.MkdirAll(rc.Dir, 0o755); err != nil {
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
	if opts.Kube != nil {
		if err := rc.setUpManager(ctx); err != nil {
			return nil, err
		}
	}
	if err := rc.Start(ctx); err != nil {
		return nil, err
	}
	success = true
	return rc, nil
}

// setUpManager writes the manager's kubeconfig and certificate directory.
func (rc *RemoteController) setUpManager(ctx context.Context) error {
	var err error
	if rc.opts.Kubeconfig != nil {
		rc.kubeconfig, err = rc.opts.Kubeconfig(ctx, rc.Netns)
	} else {
		rc.kubeconfig, err = rc.opts.Kube.ExposeInNetns(rc.Netns)
	}
	if err != nil {
		return fmt.Errorf("harness: kubeconfig of the remote-controller manager: %w", err)
	}
	rc.certDir = rc.run.Path("rc-" + rc.Node.Name + "-pki")
	if err := os.MkdirAll(rc.certDir, 0o755); err != nil {
		return err
	}
	for name, target := range map[string]string{rc.Node.Name + ".crt": rc.Cert.CertFile,
		rc.Node.Name + ".key": rc.Cert.KeyFile, "ca.crt": rc.Cert.CAFile} {
		if err := os.Symlink(target, filepath.Join(rc.certDir, name)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// Label sets the node's label ovn-transparent.io/remote-chassis to value ("" removes it): the
// manager runs a controller for the node while it is "true" (the node is not Windows).
func (rc *RemoteController) Label(ctx context.Context, value string) error {
	if rc.opts.Kube == nil {
		return fmt.Errorf("harness: the controller host of %s runs no manager", rc.Node.Name)
	}
	v := "null"
	if value != "" {
		v = strconv.Quote(value)
	}
	patch := `{"metadata":{"labels":{"ovn-transparent.io/remote-chassis":` + v + `}}}`
	_, err := rc.opts.Kube.Client().CoreV1().Nodes().Patch(ctx, rc.Node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) && value != "" {
		// Not registered yet: made as the agent's start-up does (the kubelet adopts it).
		_, err = rc.opts.Kube.Client().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: rc.Node.Name, Labels: map[string]string{"ovn-transparent.io/remote-chassis": value}}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("harness: label node %s: %w", rc.Node.Name, err)
	}
	return nil
}

// Start starts the relay and ovn-controller (again, after Kill), or the manager with
// RemoteControllerOptions.Kube, after labelling the node remote: the manager then starts
// ovn-controller once the Node has its InternalIP (WaitController waits for it).
func (rc *RemoteController) Start(ctx context.Context) error {
	if rc.opts.Kube != nil {
		return rc.startManager(ctx)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.controller != nil && !rc.controller.isDone() {
		return fmt.Errorf("harness: the remote ovn-controller of %s is running", rc.Node.Name)
	}
	// A killed relay leaves its sockets; the new one would replace them, but waiting for
	// them to appear needs them gone first.
	socks := []string{filepath.Join(rc.Dir, "db.sock"), filepath.Join(rc.Dir, "br-int.mgmt")}
	if rc.opts.BridgeRemote {
		socks = socks[:1]
	}
	for _, s := range socks {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	relay, err := rc.run.Start(ProcSpec{
		Name: "rc-" + rc.Node.Name + "-chassis-relay", Netns: rc.Netns, Path: rc.opts.Relay,
		Args: []string{"chassis-relay", "--rundir", rc.Dir, "--node-address", rc.Node.IP,
			"--ovsdb-port", strconv.Itoa(RemoteOVSDBPort), "--openflow-port", rc.opts.openFlowPort(),
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

func (rc *RemoteController) startManager(ctx context.Context) error {
	if err := rc.Label(ctx, "true"); err != nil {
		return err
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.manager != nil && !rc.manager.isDone() {
		return fmt.Errorf("harness: the remote-controller manager of %s is running", rc.Node.Name)
	}
	p, err := rc.run.Start(ProcSpec{
		Name: "rc-" + rc.Node.Name + "-remote-controllers", Netns: rc.Netns, Path: rc.opts.Relay,
		Args: []string{"remote-controllers", "--kubeconfig", rc.kubeconfig, "--rundir", filepath.Dir(rc.Dir),
			"--cert-dir", rc.certDir, "--ovsdb-port", strconv.Itoa(RemoteOVSDBPort),
			"--openflow-port", rc.opts.openFlowPort(), "--max-backoff", "2s",
			"--health-address", "127.0.0.1:9479", "--log-level", "2"},
		StopTimeout: 15 * time.Second,
	})
	if err != nil {
		return err
	}
	rc.manager = p
	return nil
}

// ControllerPID is the pid of the running ovn-controller, from its pid file; 0 when there is
// none.
func (rc *RemoteController) ControllerPID() int {
	data, err := os.ReadFile(filepath.Join(rc.Dir, "ovn-controller.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// WaitController waits until an ovn-controller runs for the node and answers on its control
// socket, and returns its pid.
func (rc *RemoteController) WaitController(ctx context.Context, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		pid := rc.ControllerPID()
		if pid != 0 {
			if _, err := rc.AppCtl(ctx, "version"); err == nil {
				return pid, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("harness: no ovn-controller answering for %s after %s", rc.Node.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Kill SIGKILLs ovn-controller and the relay (or the manager and, with it, its
// ovn-controller), as a crash of the controller host would; the node's flows stay (br-int is
// fail_mode=secure) until Start brings them back.
func (rc *RemoteController) Kill() {
	pid := rc.ControllerPID()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.manager != nil {
		rc.manager.Kill()
		// Its process group is gone with it; the kernel's parent-death signal covers a
		// controller that left it.
		if pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
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

// AppCtl runs ovs-appctl against the remote ovn-controller.
func (rc *RemoteController) AppCtl(ctx context.Context, args ...string) (string, error) {
	pid := rc.ControllerPID()
	if pid == 0 {
		return "", fmt.Errorf("harness: no remote ovn-controller for %s", rc.Node.Name)
	}
	sock := filepath.Join(rc.Dir, fmt.Sprintf("ovn-controller.%d.ctl", pid))
	return ovsCtl(ctx, nil, "ovs-appctl", append([]string{"--timeout=30", "-t", sock}, args...)...)
}

// Stop stops the daemons and removes the controller host. Idempotent.
func (rc *RemoteController) Stop() error {
	rc.mu.Lock()
	procs := []*Proc{rc.controller, rc.relay, rc.manager}
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
	if rc.certDir != "" {
		errs = append(errs, os.RemoveAll(rc.certDir))
	}
	return errors.Join(append(errs, os.RemoveAll(rc.Dir))...)
}
