//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ovn-transparent/ovn-transparent/node/hns/hnstest"
)

// The underlay is one L2 segment per run: a Linux bridge in the namespace r.Name("ul"), with
// the eth0 of every node and of the external host veth'd to it. The numbers are the same in
// every run, since every run has namespaces of its own.
const (
	UnderlaySubnet = "172.18.0.0/24"
	// UnderlayGateway is the nodes' default gateway; the external host holds it.
	UnderlayGateway = "172.18.0.254"
	// ExternalHostIP is the external host's own address.
	ExternalHostIP = "172.18.0.100"
	underlayPrefix = "/24"
	underlayBridge = "br-ul"
	maxNodes       = 99 // node i is 172.18.0.i; .100 and up are taken
)

// underlay is a run's underlay: created on the first StartNode or StartExternalHost.
type underlay struct {
	mu    sync.Mutex
	netns string         // "" until created
	hosts map[string]int // node name -> host number, kept when a node stops so it rejoins with the same IP
}

func (r *Run) underlay(ctx context.Context) (*underlay, error) {
	r.mu.Lock()
	if r.ul == nil {
		r.ul = &underlay{hosts: map[string]int{}}
	}
	u := r.ul
	r.mu.Unlock()

	u.mu.Lock()
	defer u.mu.Unlock()
	if u.netns != "" {
		return u, nil
	}
	ns, err := r.AddNetns("ul")
	if err != nil {
		deleteNetns(r.Name("ul")) // in case it was made but its loopback failed
		return nil, err
	}
	// With STP off (the default) a Linux bridge forwards on a new port at once.
	for _, args := range [][]string{
		{"link", "add", underlayBridge, "type", "bridge"},
		{"link", "set", underlayBridge, "up"},
	} {
		if _, err := Exec(ctx, ns, "ip", args...); err != nil {
			deleteNetns(ns)
			return nil, err
		}
	}
	u.netns = ns
	return u, nil
}

// NodeIP returns the underlay IP that node name has, or will have when it starts: the first
// call for a name (NodeIP or StartNode) assigns the next free address, 172.18.0.1 first, and
// the name keeps it for the whole run, also across Stop and a new StartNode. Call it for
// every name in order before starting nodes in parallel, to have stable addresses.
func (r *Run) NodeIP(ctx context.Context, name string) (string, error) {
	u, err := r.underlay(ctx)
	if err != nil {
		return "", err
	}
	host, err := u.hostNumber(name)
	if err != nil {
		return "", err
	}
	return nodeIP(host), nil
}

func nodeIP(host int) string { return fmt.Sprintf("172.18.0.%d", host) }

// hostNumber returns name's host number on the underlay, the same on every call.
func (u *underlay) hostNumber(name string) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if i, ok := u.hosts[name]; ok {
		return i, nil
	}
	i := len(u.hosts) + 1
	if i > maxNodes {
		return 0, fmt.Errorf("harness: more than %d nodes on the underlay", maxNodes)
	}
	u.hosts[name] = i
	return i, nil
}

// attach joins netns to the underlay: a veth with "eth0" in netns and port on the bridge,
// eth0 with mac and the given addresses. It also sets netns's default route via
// UnderlayGateway unless netns holds that address itself.
func (u *underlay) attach(ctx context.Context, netns, port, mac string, addrs ...string) error {
	// Both ends are created directly in their namespaces: nothing passes through (or is left
	// in) the root namespace.
	if _, err := Exec(ctx, "", "ip", "link", "add", port, "netns", u.netns, "type", "veth",
		"peer", "name", "eth0", "netns", netns); err != nil {
		return err
	}
	// Checksum offload off on both ends: a veth hands CHECKSUM_PARTIAL packets to the
	// AF_PACKET socket ovs-vswitchd reads on the userspace datapath, which forwards them with
	// a wrong checksum, and TCP silently fails.
	cmds := []struct {
		ns   string
		args []string
	}{
		{u.netns, []string{"ip", "link", "set", port, "master", underlayBridge}},
		{u.netns, []string{"ethtool", "-K", port, "tx", "off"}},
		{u.netns, []string{"ip", "link", "set", port, "up"}},
		{netns, []string{"ethtool", "-K", "eth0", "tx", "off"}},
		{netns, []string{"ip", "link", "set", "eth0", "address", mac, "mtu", "1500", "up"}},
	}
	for _, a := range addrs {
		cmds = append(cmds, struct {
			ns   string
			args []string
		}{netns, []string{"ip", "addr", "add", a, "dev", "eth0"}})
	}
	for _, c := range cmds {
		if _, err := Exec(ctx, c.ns, c.args[0], c.args[1:]...); err != nil {
			return err
		}
	}
	for _, a := range addrs {
		if strings.HasPrefix(a, UnderlayGateway+"/") {
			return nil
		}
	}
	_, err := Exec(ctx, netns, "ip", "route", "add", "default", "via", UnderlayGateway)
	return err
}

// NodeOptions configure StartNode.
type NodeOptions struct {
	// SkipChassis leaves the chassis to the caller (ovnt-node does it itself): the node gets
	// its namespace, underlay, ovsdb-server and ovs-vswitchd, and nothing else: eth0 keeps the
	// node IP, the Open_vSwitch table has no external_ids, there is no br-int or br-phy, and
	// ovn-controller is not started (call StartOVNController once the chassis is configured).
	SkipChassis bool
	// NoOVS, with SkipChassis, starts no daemon at all: the node is its namespace and its
	// underlay address on eth0, and Dir is empty, for Open vSwitch deployed onto the node
	// (as the manifests' DaemonSet does) to use as its run directory.
	NoOVS bool
	// EncapType is ovn-encap-type; default "geneve". The userspace datapath also tunnels
	// "vxlan"; it has no STT (a chassis registers with it, but no packet goes through).
	EncapType string
	// SBRemote is ovn-remote; default the run's central over TLS (SBChassisRemote), with a
	// client certificate of the run's CA for the node (StartOVNCentral must come first).
	SBRemote string
	// Listen, when set, makes the node a remote chassis' (remote.go): ovsdb-server and
	// ovs-vswitchd get these TLS files on their command lines, for the listeners ovnt-node
	// opens (--ovsdb-listen, --openflow-listen), as a remote chassis' services are
	// configured (its SSL row stays empty: the remote ovn-controller would take it for its
	// own). Listen.CAFile is the CA of the clients let in.
	Listen Cert
}

// Node is one Kubernetes node: a network namespace on the underlay with its own
// ovsdb-server, ovs-vswitchd (userspace datapath) and, as a chassis, ovn-controller.
type Node struct {
	Name      string // also the chassis' system-id and hostname
	Netns     string // r.Name(Name)
	IP        string // underlay address (no prefix), on br-phy, or on eth0 with SkipChassis
	MAC       string // eth0's, and br-phy's
	Dir       string // the node's OVS_RUNDIR: database, sockets, pidfiles
	OVSRemote string // unix:<Dir>/db.sock, the node's Open_vSwitch database
	SBRemote  string
	EncapType string
	// SBCert is the node's client certificate for SBRemote when that is the run's central,
	// of the chassis CA: common name Name, as the SB's ovn-controller role requires of a
	// chassis. StartNode
	// writes it into the Open_vSwitch SSL row; with SkipChassis that is the caller's job
	// (ovnt-node's --sb-client-cert, --sb-client-key, --sb-ca-cert).
	SBCert Cert
	// Listen is NodeOptions.Listen: the TLS identity of a remote chassis' listeners.
	Listen Cert

	run *Run
	// sbCtl is where the harness itself reads the SB: the central's unix socket, or SBRemote
	// when the caller gave one.
	sbCtl string

	mu         sync.Mutex
	ovsdb      *Proc
	vswitchd   *Proc
	controller *Proc
	ownsNetns  bool   // Stop deletes the namespace only if this node created it
	ulNetns    string // the underlay's namespace and the node's port there, once attached
	ulPort     string
	stopped    bool
}

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// StartNode starts node name on the run's underlay (created on first use) and, unless
// opts.SkipChassis, configures it as an OVN chassis the way ovn-kubernetes nodes are and
// returns once the SB lists the chassis with its encap IP. The node's IP is NodeIP(name).
// Starting a node that is running fails. On failure nothing of the node is left behind.
func (r *Run) StartNode(ctx context.Context, name string, opts NodeOptions) (*Node, error) {
	if !nodeNameRE.MatchString(name) || len(name) > 32 || name == "ul" || name == "ext" || name == "central" {
		return nil, fmt.Errorf("harness: bad node name %q (lower-case DNS label, at most 32 characters, not ul, ext or central)", name)
	}
	if opts.EncapType == "" {
		opts.EncapType = "geneve"
	}
	if err := checkEncapType(opts.EncapType); err != nil {
		return nil, fmt.Errorf("harness: node %s: %w", name, err)
	}
	sbCtl, sbCert := opts.SBRemote, Cert{}
	if opts.SBRemote == "" {
		r.mu.Lock()
		central := r.central
		r.mu.Unlock()
		switch {
		case central != nil:
			var err error
			if sbCert, err = central.PKI.IssueChassis(name); err != nil {
				return nil, err
			}
			opts.SBRemote, sbCtl = central.SBChassisRemote, central.SBRemote
		case !opts.SkipChassis:
			return nil, fmt.Errorf("harness: node %s: no SB database (StartOVNCentral first)", name)
		}
	}
	u, err := r.underlay(ctx)
	if err != nil {
		return nil, err
	}
	host, err := u.hostNumber(name)
	if err != nil {
		return nil, err
	}
	n := &Node{
		Name:      name,
		Netns:     r.Name(name),
		IP:        nodeIP(host),
		MAC:       fmt.Sprintf("0a:58:ac:12:00:%02x", host), // like ovn-kubernetes' 0a:58 + IP
		Dir:       r.Path("nodes", name),
		SBRemote:  opts.SBRemote,
		EncapType: opts.EncapType,
		SBCert:    sbCert,
		Listen:    opts.Listen,
		run:       r,
		sbCtl:     sbCtl,
	}
	n.OVSRemote = "unix:" + filepath.Join(n.Dir, "db.sock")
	if err := os.MkdirAll(filepath.Dir(n.Dir), 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(n.Dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("harness: node %s is already running", name)
		}
		return nil, err
	}
	success := false
	defer func() {
		if !success {
			n.Stop()
		}
	}()

	if _, err := r.AddNetns(name); err != nil {
		return nil, err
	}
	n.ownsNetns = true
	// arp_ignore/arp_announce: on the userspace datapath the node's kernel still sees every
	// frame on the veths attached to OVS and, with the default arp_ignore=0, answers ARP for
	// any of its addresses on any of them; pods then cache a node address (the management
	// port's) with the MAC of their own veth's host end. ip_forward: the node routes between
	// its management port, its pods and the underlay, as a Kubernetes node does.
	if _, err := n.Exec(ctx, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1",
		"net.ipv4.conf.all.arp_announce=2", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	port := fmt.Sprintf("ul-n%d", host)
	if err := u.attach(ctx, n.Netns, port, n.MAC, n.IP+underlayPrefix); err != nil {
		return nil, fmt.Errorf("harness: node %s: underlay: %w", name, err)
	}
	n.ulNetns, n.ulPort = u.netns, port
	// Strict reverse-path filtering on eth0: ovs-vswitchd reads eth0 through an AF_PACKET
	// socket, which does not divert frames from the kernel as the kernel datapath does, so the
	// node's own stack also receives every frame on eth0. Once the node IP is on br-phy, no
	// route points at eth0 and this drops the stack's copy; without it every GENEVE packet
	// arrives twice, the kernel answers each with ICMP port unreachable (rate-limited), and
	// with ip_forward=1 it would forward copies. (With SkipChassis eth0 keeps the IP and the
	// filter passes its traffic until ovnt-node moves the IP to a bridge.)
	if _, err := n.Exec(ctx, "sysctl", "-qw", "net.ipv4.conf.eth0.rp_filter=1"); err != nil {
		return nil, err
	}

	if opts.NoOVS {
		success = true
		return n, nil
	}
	dbArgs := []string{
		// Where ovs-vsctl set-manager puts further remotes, as the packaged ovs-ctl does.
		"--remote=db:Open_vSwitch,Open_vSwitch,manager_options"}
	if opts.Listen.CertFile != "" {
		// A remote chassis stands for a Windows node: its ovsdb-server serves what that
		// node's service does (the OVS MSI's command line plus the windows_node role's),
		// and nothing the harness adds.
		if dbArgs, err = hnstest.OVSDBServerArgs("remote"); err != nil {
			return nil, err
		}
		dbArgs = append(dbArgs, sslArgs(opts.Listen)...)
	}
	n.ovsdb, err = r.startDB(ctx, name+"-ovsdb-server", n.Netns, n.Dir, "db", ovsSchema, dbArgs...)
	if err != nil {
		return nil, err
	}
	// --no-wait: ovs-vswitchd is not running yet to acknowledge the change.
	init := []string{"--no-wait", "init"}
	if !opts.SkipChassis {
		init = append(init, "--", "set", "Open_vSwitch", ".",
			"external_ids:system-id="+name,
			"external_ids:hostname="+name,
			"external_ids:ovn-remote="+opts.SBRemote,
			"external_ids:ovn-encap-type="+opts.EncapType,
			"external_ids:ovn-encap-ip="+n.IP,
			// The kernel has no openvswitch module: br-int must be a userspace bridge, and
			// ovn-controller creates its patch ports and tunnels with this type.
			"external_ids:ovn-bridge-datapath-type=netdev")
		if sbCert.CertFile != "" {
			// ovn-controller reads its TLS files from the SSL row, as ovnt-node writes it.
			init = append(init, "--", "set-ssl", sbCert.KeyFile, sbCert.CertFile, sbCert.CAFile)
		}
	}
	if _, err := n.VSCtl(ctx, init...); err != nil {
		return nil, err
	}
	// In the node's namespace: the userspace datapath creates its bridges' internal ports
	// as tap devices in the namespace of ovs-vswitchd, and opens its system ports there.
	n.vswitchd, err = r.startDaemon(ctx, n.vswitchdDaemon())
	if err != nil {
		return nil, err
	}
	go n.superviseVSwitchd(n.vswitchd)
	if !opts.SkipChassis {
		if err := n.setupChassis(ctx); err != nil {
			return nil, fmt.Errorf("harness: node %s: %w", name, err)
		}
		if _, err := n.StartOVNController(ctx); err != nil {
			return nil, err
		}
		if err := n.waitChassis(ctx); err != nil {
			return nil, err
		}
	}
	success = true
	return n, nil
}

// vswitchdDaemon is the node's ovs-vswitchd. It is ready once it answers on its control
// socket and every bridge of the database accepts OpenFlow connections on its management
// socket: ovs-vswitchd answers ovs-appctl before it has read the database and made the
// bridges, and until then a restarted one's <bridge>.mgmt is its predecessor's file, which
// refuses connections (ovs-ofctl: "Connection refused"). A fresh database has no bridges.
func (n *Node) vswitchdDaemon() ovsDaemon {
	d := ovsDaemon{
		name: n.Name + "-ovs-vswitchd", bin: "ovs-vswitchd", netns: n.Netns, dir: n.Dir,
		args: []string{n.OVSRemote},
	}
	if n.Listen.CertFile != "" {
		// For br-int's passive controller target, the remote ovn-controller's OpenFlow.
		d.args = append(d.args, sslArgs(n.Listen)...)
	}
	d.ready = func(ctx context.Context) error {
		if _, err := ovsCtl(ctx, nil, "ovs-appctl", "--timeout=5", "-t", d.ctlPath(0), "version"); err != nil {
			return err
		}
		bridges, err := n.VSCtl(ctx, "list-br")
		if err != nil {
			return err
		}
		for _, br := range strings.Fields(bridges) {
			// An OpenFlow handshake, not a bare connect: ovs-vswitchd logs a warning for
			// every connection that closes before it has said hello.
			if _, err := n.OFCtl(ctx, "--timeout=5", "-O", ofProtocols, "probe", br); err != nil {
				return fmt.Errorf("bridge %s: management socket: %w", br, err)
			}
		}
		return nil
	}
	return d
}

// ofProtocols are the OpenFlow versions ovs-ofctl offers when it probes a bridge: all of
// them, since a bridge may allow only some.
const ofProtocols = "OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15"

// RestartVSwitchd kills the node's ovs-vswitchd as a crash would (SIGKILL) and starts another
// on the same database, run directory and namespace, with the same command line. It returns
// once the new one is ready as at StartNode, its bridges' management sockets included; the
// bridges come back from the database without flows, and their OpenFlow port numbers may
// change.
func (n *Node) RestartVSwitchd(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return fmt.Errorf("harness: node %s is stopped", n.Name)
	}
	old := n.vswitchd
	n.mu.Unlock()
	if old != nil {
		old.Kill()
	}
	p, err := n.run.startDaemon(ctx, n.vswitchdDaemon())
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.vswitchd = p
	n.mu.Unlock()
	go n.superviseVSwitchd(p)
	return nil
}

// superviseVSwitchd waits for p, the node's ovs-vswitchd, to exit. If it died on its own,
// the run records the crash loudly, with the end of its log, and starts another one: the
// userspace datapath of Debian's OVS 3.1 aborts now and then in its connection tracker
// (conntrack.c conn_update_state(), see docs/development.md), and a node without a
// datapath would fail every later test that uses it. What the crash broke (connections it
// tracked, packets in flight) stays broken; the tests that failed because of it say so in
// their output, next to the crash.
func (n *Node) superviseVSwitchd(p *Proc) {
	n.supervise(p, "ovs-vswitchd", n.RestartVSwitchd)
}

// supervise waits for p, the node's daemon name, to exit. If it died on its own (not
// stopped or killed by the harness or a test), the run records the crash loudly, with the
// end of the daemon's log, and restart starts another one.
func (n *Node) supervise(p *Proc, name string, restart func(context.Context) error) {
	<-p.Done()
	n.mu.Lock()
	stopped := n.stopped
	n.mu.Unlock()
	if !p.Crashed() || stopped || n.run.isClosed() {
		return
	}
	n.run.noteCrash(fmt.Sprintf("node %s: %s (pid %d) exited on its own (%v); its log ends: %s; restarting it",
		n.Name, name, p.Pid(), p.Err(), logTail(filepath.Join(n.run.LogDir, n.Name+"-"+name+".log"), 3)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := restart(ctx); err != nil {
		n.run.noteCrash(fmt.Sprintf("node %s: %s could not be restarted: %v", n.Name, name, err))
	}
}

// logTail is the last n lines of the file at path, on one line.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return strings.ReplaceAll(lastLines(string(b), n), "\n", " | ")
}

// setupChassis creates br-int and br-phy and moves the node IP onto br-phy.
func (n *Node) setupChassis(ctx context.Context) error {
	_, err := n.VSCtl(ctx,
		// fail_mode=secure: until ovn-controller has installed its flows, br-int drops
		// everything instead of acting as a learning switch between pods.
		// disable-in-band: ovn-controller talks to br-int on its unix management socket, so
		// the in-band control flows have nothing to protect.
		"--", "--may-exist", "add-br", "br-int",
		"--", "set", "Bridge", "br-int", "datapath_type=netdev", "fail_mode=secure",
		"other_config:disable-in-band=true",
		// The userspace datapath sends tunnel packets through the kernel's routing of the
		// encap IP to an OVS bridge port: the encap IP must sit on the internal port of a
		// netdev bridge that holds the underlay interface, or GENEVE packets are never sent.
		// hwaddr keeps br-phy's MAC equal to eth0's, stable across runs.
		"--", "--may-exist", "add-br", "br-phy",
		"--", "set", "Bridge", "br-phy", "datapath_type=netdev",
		fmt.Sprintf("other_config:hwaddr=%q", n.MAC),
		"--", "--may-exist", "add-port", "br-phy", "eth0")
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"addr", "flush", "dev", "eth0"}, // also drops the default route through eth0
		{"addr", "add", n.IP + underlayPrefix, "dev", "br-phy"},
		{"link", "set", "br-phy", "up"},
		{"route", "replace", "default", "via", UnderlayGateway, "dev", "br-phy"},
	} {
		if _, err := n.Exec(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// waitChassis waits until the SB lists the node's chassis with its encap.
func (n *Node) waitChassis(ctx context.Context) error {
	n.mu.Lock()
	p := n.controller
	n.mu.Unlock()
	return waitDaemon(ctx, n.run, p, "chassis "+n.Name+" in the SB", func(ctx context.Context) error {
		out, err := ovsCtl(ctx, nil, "ovn-sbctl", "--db="+n.sbCtl, ctlTimeout, "--bare",
			"--columns=ip", "find", "Encap", "chassis_name="+n.Name, "type="+n.EncapType)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != n.IP {
			return fmt.Errorf("%s encap of chassis %s: %q, want %s", n.EncapType, n.Name, out, n.IP)
		}
		return nil
	})
}

// StartOVNController starts the node's ovn-controller in its namespace and waits until it
// answers on its control socket (not until it has registered: StartNode waits for that).
// It fails if one is running; after OVNController().Kill() or Stop() it starts a new one
// with the same database, as a restart of the daemon would.
func (n *Node) StartOVNController(ctx context.Context) (*Proc, error) {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil, fmt.Errorf("harness: node %s is stopped", n.Name)
	}
	if n.controller != nil && !n.controller.isDone() {
		n.mu.Unlock()
		return nil, fmt.Errorf("harness: ovn-controller of node %s is running", n.Name)
	}
	n.mu.Unlock()
	// OVS_RUNDIR (set by startDaemon) is how ovn-controller finds br-int.mgmt, the OpenFlow
	// socket of this node's ovs-vswitchd.
	p, err := n.run.startDaemon(ctx, ovsDaemon{
		name: n.Name + "-ovn-controller", bin: "ovn-controller", netns: n.Netns, dir: n.Dir,
		args: []string{n.OVSRemote},
		// SIGTERM: "ovn-appctl exit" makes ovn-controller clean up the SB and br-int first,
		// and hangs when the SB is already gone.
	})
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.controller = p
	n.mu.Unlock()
	go n.superviseController(p)
	return p, nil
}

// superviseController restarts the node's ovn-controller p if it dies on its own, as
// systemd restarts the ovn-host service on a real node, and records the crash loudly with
// the end of its log: OVN 23.03's ovn-controller aborts now and then when its OpenFlow
// connection is made again while ports are being removed (if-status.c
// if_status_mgr_clear(), see docs/development.md). A test that kills it restarts it
// itself.
func (n *Node) superviseController(p *Proc) {
	n.supervise(p, "ovn-controller", func(ctx context.Context) error {
		_, err := n.StartOVNController(ctx)
		return err
	})
}

// OVNController is the running (or last) ovn-controller of the node; nil if none was
// started. Kill it to test a crash.
func (n *Node) OVNController() *Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.controller
}

// OVSDB is the node's ovsdb-server (its Open_vSwitch database). Kill it to test the
// database going away; the node has none afterwards.
func (n *Node) OVSDB() *Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ovsdb
}

// Stop is the node leaving: its daemons are stopped (ovn-controller with SIGTERM, so its
// Chassis row stays in the SB as after a crash; removing it is the master's job), its
// namespace is deleted with everything in it (pods' veth ends, the underlay veth) and its
// directory removed. Idempotent.
func (n *Node) Stop() error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	procs := []*Proc{n.controller, n.vswitchd, n.ovsdb}
	owns := n.ownsNetns
	n.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			p.Stop()
		}
	}
	var errs []error
	if n.ulPort != "" {
		// Deleting a namespace only drops its name; the kernel destroys it, and the veth to
		// the underlay with it, later from a work queue. Deleting the underlay end now
		// removes both ends at once, so a node rejoining at once can recreate its port.
		if _, err := Exec(context.Background(), n.ulNetns, "ip", "link", "del", n.ulPort); err != nil {
			errs = append(errs, err)
		}
	}
	if owns {
		errs = append(errs, deleteNetns(n.Netns))
	}
	return errors.Join(append(errs, os.RemoveAll(n.Dir))...)
}

// VSCtl runs ovs-vsctl against the node's database and returns its standard output.
func (n *Node) VSCtl(ctx context.Context, args ...string) (string, error) {
	return ovsCtl(ctx, nil, "ovs-vsctl", append([]string{"--db=" + n.OVSRemote, ctlTimeout}, args...)...)
}

// OFCtl runs ovs-ofctl for the node's bridges: "br-int" names <Dir>/br-int.mgmt through
// OVS_RUNDIR.
func (n *Node) OFCtl(ctx context.Context, args ...string) (string, error) {
	return ovsCtl(ctx, []string{"OVS_RUNDIR=" + n.Dir}, "ovs-ofctl", args...)
}

// AppCtl runs ovs-appctl against one of the node's daemons: "ovs-vswitchd", "ovsdb-server"
// or "ovn-controller".
func (n *Node) AppCtl(ctx context.Context, daemon string, args ...string) (string, error) {
	var sock string
	switch daemon {
	case "ovs-vswitchd":
		sock = filepath.Join(n.Dir, daemon+".ctl")
	case "ovn-controller":
		p := n.OVNController()
		if p == nil {
			return "", fmt.Errorf("harness: node %s has no ovn-controller", n.Name)
		}
		// ovn-controller 23.03 names its socket by pid (it has no --unixctl).
		sock = filepath.Join(n.Dir, fmt.Sprintf("ovn-controller.%d.ctl", p.Pid()))
	case "ovsdb-server":
		sock = filepath.Join(n.Dir, "db.ctl")
	default:
		return "", fmt.Errorf("harness: node %s has no daemon %q", n.Name, daemon)
	}
	return ovsCtl(ctx, nil, "ovs-appctl", append([]string{"--timeout=30", "-t", sock}, args...)...)
}

// Exec runs a short command in the node's namespace and returns its combined output.
func (n *Node) Exec(ctx context.Context, name string, args ...string) (string, error) {
	return Exec(ctx, n.Netns, name, args...)
}
