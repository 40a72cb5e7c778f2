//go:build linux

package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Schemas installed by Debian's ovn-common and openvswitch-common packages, on the host or in
// the OVN rootfs (ovnShare).
const (
	nbSchema  = "/usr/share/ovn/ovn-nb.ovsschema"
	sbSchema  = "/usr/share/ovn/ovn-sb.ovsschema"
	ovsSchema = "/usr/share/openvswitch/vswitch.ovsschema"
)

// readyTimeout bounds every wait for a daemon to come up, whatever deadline the caller's
// context has: a daemon that is not ready in this time is broken, not slow.
const readyTimeout = 30 * time.Second

// ctlTimeout is passed to every ovs-vsctl / ovn-nbctl / ovn-sbctl call as --timeout, so a
// call against a dead server fails instead of hanging a test without a deadline.
const ctlTimeout = "--timeout=30"

// OVNCentral is a run's OVN control plane: NB and SB ovsdb-server and ovn-northd, on the
// central host, a network namespace of its own on the underlay at CentralIP.
//
// The product's connections are TLS with client certificates of the run's CA (PKI), as in a
// deployment: ovn-controllers reach the SB at ssl:CentralIP:6642 (SBChassisRemote), through an
// SB Connection row with role ovn-controller, so SB RBAC applies; the master reaches the NB at
// NBMasterRemote (MasterArgs). The underlay also has the NB at CentralIP:6641, which nothing
// of the run uses but where a pod or a node could try it.
//
// The servers themselves run in the root namespace, where the master is, and also serve
// unix sockets in Dir: ovn-northd uses those, like an ovn-northd beside its databases in
// a deployment (ovn-ctl's default), and so do the tests' ovn-nbctl and ovn-sbctl
// (NBCtl, SBCtl), which only inspect. TLS listens on ephemeral ports of the root
// namespace's loopback, so that two runs never collide; the central host forwards its
// ports 6641 and 6642 there (TLS passes through the forwarder untouched, end to end).
type OVNCentral struct {
	Dir      string // <run>/central: databases, sockets, pidfiles
	NBRemote string // unix:<Dir>/nb.sock: ovn-northd and test inspection only
	SBRemote string // unix:<Dir>/sb.sock: ovn-northd and test inspection only

	// Netns is the central host's namespace on the underlay, holding CentralIP.
	Netns string
	// NBMasterRemote is ssl:127.0.0.1:<port>, where the master (in the root namespace)
	// reaches the NB.
	NBMasterRemote string
	// SBChassisRemote is ssl:CentralIP:6642, where every chassis' ovn-controller connects
	// with the ovn-controller role; NBUnderlayRemote is ssl:CentralIP:6641.
	SBChassisRemote  string
	NBUnderlayRemote string
	// PKI is the run's CA; MasterCert the master's client certificate.
	PKI        *PKI
	MasterCert Cert

	NB, SB, Northd *Proc
}

// The central host's place on the underlay, and the OVN database ports of a deployment.
const (
	CentralIP  = "172.18.0.250"
	centralMAC = "0a:58:ac:12:00:fa" // 0a:58 + CentralIP, like the nodes'
	NBPort     = 6641
	SBPort     = 6642
)

// centralServerNames are the names the NB and SB certificates carry: the addresses clients
// dial, and a service name for --nb-server-name.
var centralServerNames = []string{"127.0.0.1", CentralIP, "ovn-central"}

// centralDir is where a run's central lives.
func centralDir(r *Run) string { return r.Path("central") }

// StartOVNCentral starts the run's NB and SB databases and ovn-northd, and returns once
// northd has processed the (empty) NB into the SB. A run has at most one central; a second
// call fails.
func (r *Run) StartOVNCentral(ctx context.Context) (*OVNCentral, error) {
	dir := centralDir(r)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, errors.New("harness: this run already has an OVN central")
		}
		return nil, err
	}
	c := &OVNCentral{
		Dir:      dir,
		NBRemote: "unix:" + filepath.Join(dir, "nb.sock"),
		SBRemote: "unix:" + filepath.Join(dir, "sb.sock"),
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	success := false
	defer func() {
		if !success {
			c.stop()
			os.RemoveAll(dir)
		}
	}()
	var err error
	if c.PKI, err = newPKI(r.Path("pki")); err != nil {
		return nil, err
	}
	nbCert, err := c.PKI.IssueServer("ovnnb", centralServerNames...)
	if err != nil {
		return nil, err
	}
	sbCert, err := c.PKI.IssueServer("ovnsb", centralServerNames...)
	if err != nil {
		return nil, err
	}
	if c.MasterCert, err = c.PKI.IssueClient("ovnt-master"); err != nil {
		return nil, err
	}
	c.NB, err = r.startDB(ctx, "ovn-nb", "", dir, "nb", nbSchema,
		append(sslArgs(nbCert), "--remote=pssl:0:127.0.0.1")...)
	if err != nil {
		return nil, err
	}
	// The SB's TLS remote comes from its Connection row, which carries the role. It also
	// lets in the chassis CA's certificates, which the NB does not.
	sbCert.CAFile = c.PKI.SBClientCAs
	c.SB, err = r.startDB(ctx, "ovn-sb", "", dir, "sb", sbSchema,
		append(sslArgs(sbCert), "--remote=db:OVN_Southbound,SB_Global,connections")...)
	if err != nil {
		return nil, err
	}
	// init creates the NB_Global / SB_Global rows; --no-wait because northd is not up yet to
	// bump sb_cfg, and ovn-nbctl would otherwise wait for it.
	if _, err := c.NBCtl(ctx, "--no-wait", "init"); err != nil {
		return nil, err
	}
	if _, err := c.SBCtl(ctx, "init"); err != nil {
		return nil, err
	}
	// The server's probe of each chassis as long as the chassis' own (ovnt-node
	// --sb-probe-interval): OVN's 5 s drops nodes whose traffic crosses a busy userspace
	// datapath (docs/upstream-e2e.md, "In make test").
	if _, err := c.SBCtl(ctx, "--inactivity-probe=60000", "set-connection", "role=ovn-controller", "pssl:0:127.0.0.1"); err != nil {
		return nil, err
	}
	// ovn-northd stays on the unix sockets: it runs beside the databases, as ovn-ctl runs
	// it on a central host, and the file system's permissions guard the sockets.
	c.Northd, err = r.startDaemon(ctx, ovsDaemon{
		name: "ovn-northd", bin: "ovn-northd", dir: dir,
		args: []string{"--ovnnb-db=" + c.NBRemote, "--ovnsb-db=" + c.SBRemote},
	})
	if err != nil {
		return nil, err
	}
	// --wait=sb returns once northd has copied nb_cfg into the SB: northd holds the SB lock
	// and has computed its first logical flows (and the SB's RBAC roles, which northd writes).
	if _, err := c.NBCtl(ctx, "--wait=sb", "sync"); err != nil {
		return nil, fmt.Errorf("harness: waiting for ovn-northd: %w", err)
	}
	nbPort, err := boundPort(ctx, r, "ovn-nb")
	if err != nil {
		return nil, err
	}
	sbPort, err := boundPort(ctx, r, "ovn-sb")
	if err != nil {
		return nil, err
	}
	c.NBMasterRemote = fmt.Sprintf("ssl:127.0.0.1:%d", nbPort)
	if c.Netns, err = r.startCentralHost(ctx, map[int]int{NBPort: nbPort, SBPort: sbPort}); err != nil {
		return nil, err
	}
	c.SBChassisRemote = fmt.Sprintf("ssl:%s:%d", CentralIP, SBPort)
	c.NBUnderlayRemote = fmt.Sprintf("ssl:%s:%d", CentralIP, NBPort)
	r.mu.Lock()
	r.central = c
	r.mu.Unlock()
	success = true
	return c, nil
}

// sslArgs are ovsdb-server's options for serving with cert and letting in the clients
// cert.CAFile signed.
func sslArgs(cert Cert) []string {
	return []string{"--private-key=" + cert.KeyFile, "--certificate=" + cert.CertFile, "--ca-cert=" + cert.CAFile}
}

// MasterArgs are ovnt-master's flags to reach the NB over TLS as the master.
func (c *OVNCentral) MasterArgs() []string {
	return []string{
		"--nb-address=" + c.NBMasterRemote,
		"--nb-client-cert=" + c.MasterCert.CertFile,
		"--nb-client-key=" + c.MasterCert.KeyFile,
		"--nb-ca-cert=" + c.MasterCert.CAFile,
	}
}

var listeningOnPort = regexp.MustCompile(`listening on port (\d+)`)

// boundPort returns the port the daemon logging to <LogDir>/<name>.log chose for its one
// pssl:0 or ptcp:0 remote; ovsdb-server reports it only in its log.
func boundPort(ctx context.Context, r *Run, name string) (int, error) {
	log := filepath.Join(r.LogDir, name+".log")
	for {
		b, err := os.ReadFile(log)
		if err != nil {
			return 0, err
		}
		if m := listeningOnPort.FindAllSubmatch(b, -1); len(m) > 0 {
			return strconv.Atoi(string(m[len(m)-1][1]))
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("harness: no \"listening on port\" in %s: %w", log, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startCentralHost puts the central host on the underlay at CentralIP and forwards each of
// its ports (key) to the root namespace's loopback port (value).
func (r *Run) startCentralHost(ctx context.Context, ports map[int]int) (string, error) {
	u, err := r.underlay(ctx)
	if err != nil {
		return "", err
	}
	ns, err := r.AddNetns("central")
	if err != nil {
		return "", err
	}
	if err := u.attach(ctx, ns, "ul-central", centralMAC, CentralIP+underlayPrefix); err != nil {
		// The veth's underlay end outlives the namespace's name; delete it first (see Node.Stop).
		Exec(context.Background(), u.netns, "ip", "link", "del", "ul-central")
		return "", err
	}
	for port, target := range ports {
		var ln net.Listener
		err := InNetns(ns, func() error {
			var err error
			ln, err = net.Listen("tcp", net.JoinHostPort(CentralIP, strconv.Itoa(port)))
			return err
		})
		if err != nil {
			return "", fmt.Errorf("harness: central host: listening on %d: %w", port, err)
		}
		fwd := &tcpForwarder{ln: ln, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(target)), conns: map[net.Conn]struct{}{}}
		fwd.wg.Add(1)
		go fwd.serve()
		r.AddCleanup(fmt.Sprintf("central host forwarder of port %d", port), fwd.Close)
	}
	return ns, nil
}

// stop stops whichever daemons of the central were started, northd first.
func (c *OVNCentral) stop() {
	for _, p := range []*Proc{c.Northd, c.SB, c.NB} {
		if p != nil {
			p.Stop()
		}
	}
}

// NBCtl runs ovn-nbctl against the run's NB database and returns its standard output.
func (c *OVNCentral) NBCtl(ctx context.Context, args ...string) (string, error) {
	return ovsCtl(ctx, nil, "ovn-nbctl", append([]string{"--db=" + c.NBRemote, ctlTimeout}, args...)...)
}

// SBCtl runs ovn-sbctl against the run's SB database and returns its standard output.
func (c *OVNCentral) SBCtl(ctx context.Context, args ...string) (string, error) {
	return ovsCtl(ctx, nil, "ovn-sbctl", append([]string{"--db=" + c.SBRemote, ctlTimeout}, args...)...)
}

// ovsCtl runs an OVS/OVN command-line tool in the root namespace (every database of a run has
// a unix socket, reachable from there) and returns its standard output alone, so callers can
// parse it; standard error goes into the error.
// env, if any, is added to the harness's own environment.
func ovsCtl(ctx context.Context, env []string, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ovsDaemon is one OVS or OVN daemon of a run.
type ovsDaemon struct {
	name  string // unique in the run: process name, <LogDir>/<name>.log
	bin   string
	stem  string // <dir>/<stem>.pid and .ctl; default bin (two ovsdb-servers share the central dir)
	netns string // full name; "" for the root namespace
	dir   string // run directory of the daemon: pidfile, control socket, OVS_RUNDIR
	args  []string
	// ready reports whether the daemon serves; default: it answers on its control socket.
	ready func(ctx context.Context) error
}

// ctlPath is the daemon's control socket once it runs as pid.
func (d ovsDaemon) ctlPath(pid int) string {
	if d.bin == "ovn-controller" {
		// ovn-controller 23.03 has no --unixctl option: it always listens on
		// <OVN_RUNDIR>/ovn-controller.<pid>.ctl.
		return filepath.Join(d.dir, fmt.Sprintf("ovn-controller.%d.ctl", pid))
	}
	return d.file(".ctl")
}

// file is <dir>/<stem><ext>: the daemon's pidfile and control socket.
func (d ovsDaemon) file(ext string) string {
	stem := d.stem
	if stem == "" {
		stem = d.bin
	}
	return filepath.Join(d.dir, stem+ext)
}

// daemonEnv points every OVS and OVN default path at dir. Without it a daemon or tool falls
// back to /var/run/openvswitch, /etc/openvswitch or /var/log/openvswitch for the files we do
// not name on its command line (ovs-vswitchd's <bridge>.mgmt sockets, which ovn-controller
// and ovs-ofctl then look for in OVS_RUNDIR; ovn-controller's system-id-override in
// OVN_SYSCONFDIR), and two nodes would share them.
func daemonEnv(dir, logDir string) []string {
	return []string{
		"OVS_RUNDIR=" + dir, "OVS_DBDIR=" + dir, "OVS_SYSCONFDIR=" + dir, "OVS_LOGDIR=" + logDir,
		"OVN_RUNDIR=" + dir, "OVN_DBDIR=" + dir, "OVN_SYSCONFDIR=" + dir, "OVN_LOGDIR=" + logDir,
	}
}

// startDaemon starts d in the foreground as a child of the run (no --detach: it must die with
// the test process) and waits until it is ready.
func (r *Run) startDaemon(ctx context.Context, d ovsDaemon) (*Proc, error) {
	ctlPath := d.ctlPath(9999999) // the longest a pid makes it
	if len(ctlPath) > 100 {
		// sun_path holds 107 bytes. OVS daemons work around longer paths through
		// /proc/self/fd, but not every client does.
		return nil, fmt.Errorf("harness: socket path %s too long; use a shorter Options.Root or name", ctlPath)
	}
	args := []string{
		"--no-chdir",
		"--pidfile=" + d.file(".pid"),
		"--log-file=" + filepath.Join(r.LogDir, d.name+".log"),
		// The log file gets everything at INFO. Syslog would mix runs together on the host;
		// errors also go to the console (<name>.out) so a daemon that dies before opening
		// its log file still says why.
		"-vsyslog:off", "-vconsole:err",
	}
	if d.bin != "ovn-controller" {
		args = append(args, "--unixctl="+ctlPath)
	}
	args = append(args, d.args...)
	p, err := r.Start(ProcSpec{
		Name: d.name, Netns: d.netns, Path: d.bin, Args: args,
		Env: daemonEnv(d.dir, r.LogDir), Dir: d.dir,
	})
	if err != nil {
		return nil, err
	}
	ctlPath = d.ctlPath(p.Pid()) // "ip netns exec" execs the daemon: same pid
	ready := d.ready
	if ready == nil {
		// A stale socket left by a killed predecessor refuses connections, so this test
		// also holds on a restart.
		ready = func(ctx context.Context) error {
			_, err := ovsCtl(ctx, nil, "ovs-appctl", "--timeout=5", "-t", ctlPath, "version")
			return err
		}
	}
	if err := waitDaemon(ctx, r, p, d.name, ready); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// startDB creates <dir>/<stem>.db from schema (if missing) and serves it with ovsdb-server on
// unix:<dir>/<stem>.sock; extraArgs (more remotes, TLS files) are added to its command line.
func (r *Run) startDB(ctx context.Context, name, netns, dir, stem, schema string, extraArgs ...string) (*Proc, error) {
	db := filepath.Join(dir, stem+".db")
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		if _, err := ovsCtl(ctx, nil, "ovsdb-tool", "create", db, ovnShare(schema)); err != nil {
			return nil, err
		}
	}
	remote := "unix:" + filepath.Join(dir, stem+".sock")
	args := append([]string{db, "--remote=p" + remote}, extraArgs...)
	return r.startDaemon(ctx, ovsDaemon{
		name: name, bin: "ovsdb-server", stem: stem, netns: netns, dir: dir, args: args,
		// ovsdb-server opens its remotes in its main loop, after the control socket: wait
		// for the database socket itself.
		ready: func(ctx context.Context) error {
			_, err := ovsCtl(ctx, nil, "ovsdb-client", "--timeout=5", "list-dbs", remote)
			return err
		},
	})
}

// waitDaemon polls ready every 20 ms until it succeeds, p exits (the error then carries the
// end of p's log, where the reason is), or readyTimeout or ctx ends.
func waitDaemon(ctx context.Context, r *Run, p *Proc, what string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("harness: %s exited (%v) before it was ready:\n%s",
				what, p.Err(), daemonLogTail(r, p.Spec.Name, 20))
		case <-ctx.Done():
			return fmt.Errorf("harness: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// daemonLogTail returns the last n lines of a daemon's log file and of its captured output.
func daemonLogTail(r *Run, name string, n int) string {
	var b strings.Builder
	for _, f := range []string{name + ".log", name + ".out"} {
		data, err := os.ReadFile(filepath.Join(r.LogDir, f))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// ChassisEncaps reads `ovn-sbctl show` output into chassis name -> its encaps as
// "<type> <ip>" (e.g. "geneve 172.18.0.1"): what an operator checks to see a node joined.
func ChassisEncaps(show string) map[string][]string {
	res := map[string][]string{}
	var chassis, encap string
	for _, line := range strings.Split(show, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "Chassis":
			chassis, encap = strings.Trim(f[1], `"`), ""
			res[chassis] = nil
		case "Encap":
			encap = f[1]
		case "ip:":
			if chassis != "" && encap != "" {
				res[chassis] = append(res[chassis], encap+" "+strings.Trim(f[1], `"`))
				encap = ""
			}
		}
	}
	return res
}

// ListDBs sends an OVSDB list_dbs from the network namespace netns (a name or a path, as
// InNetns takes) to addr, over TLS with cfg unless cfg is nil, and returns the databases the
// server names: what any client, a pod's included, can learn when the server lets it talk.
func ListDBs(netns, addr string, cfg *tls.Config) (string, error) {
	var conn net.Conn
	err := InNetns(netns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// A deadline only so that a server that says nothing cannot hang the caller.
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if cfg != nil {
		conn = tls.Client(conn, cfg)
	}
	if _, err := conn.Write([]byte(`{"method":"list_dbs","params":[],"id":0}`)); err != nil {
		return "", err
	}
	var reply struct {
		Result []string        `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		return "", err
	}
	if len(reply.Result) == 0 {
		return "", fmt.Errorf("list_dbs: no result (error %s)", reply.Error)
	}
	return strings.Join(reply.Result, ","), nil
}
