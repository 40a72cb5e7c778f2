// Package doctor is `ovnt-node doctor`: it reads a node's state (HNS, the local Open_vSwitch
// database, OpenFlow, the Southbound database, the CNI files, the Node object) and says, for
// each part a pod's network depends on, whether it is in place and, when it is not, what to
// do. It changes nothing. The checks are OS-neutral and take what they read as inputs, so
// that they run on Linux against the HNS model and a real ovsdb-server in tests; the HNS
// ones are skipped on a node without HNS (Linux).
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// IntegrationBridge is the bridge ovn-controller programs.
const IntegrationBridge = "br-int"

// Node is what the doctor reads. A nil function or client skips the checks that need it,
// saying why.
type Node struct {
	Name          string // the node (and chassis) name
	UplinkIface   string // --uplink-interface; empty: no gateway bridge
	GatewayBridge string
	CNIBinDir     string
	CNIConfDir    string
	ExeSuffix     string // ".exe" on Windows

	// Switch is the local Open_vSwitch database, or nil with SwitchErr saying why.
	Switch    *ovs.Switch
	SwitchErr error

	// OVSDBListen and OpenFlowListen are a remote chassis' listeners (--ovsdb-listen,
	// --openflow-listen: "pssl:6640[:IP]"); empty on a node whose ovn-controller is local.
	OVSDBListen, OpenFlowListen string

	// HNS and IP are the Windows host; nil elsewhere. Network is the HNS network's name.
	HNS     hns.HNS
	IP      hns.IPHelper
	Network string

	// OpenFlow connects to bridge's OpenFlow management socket and returns once it
	// answered, or why it did not.
	OpenFlow func(ctx context.Context, bridge string) error
	// SBChassis returns the chassis names the Southbound database holds.
	SBChassis func(ctx context.Context) ([]string, error)
	// Runtime returns the container runtime of the Node as kubelet reports it
	// (status.nodeInfo.containerRuntimeVersion, e.g. "containerd://1.7.20").
	Runtime func(ctx context.Context) (string, error)
}

// Result is one check's verdict.
type Result struct {
	Check  string
	OK     bool
	Skip   string // why it was not checked; then OK means nothing
	Detail string // what was found
	Fix    string // what to do, when not OK
}

func ok(check, detail string) Result { return Result{Check: check, OK: true, Detail: detail} }
func skip(check, why string) Result  { return Result{Check: check, Skip: why} }
func fail(check, detail, fix string) Result {
	return Result{Check: check, Detail: detail, Fix: fix}
}

// Run runs every check, each bounded by timeout, in the order a node comes up.
func Run(ctx context.Context, n Node, timeout time.Duration) []Result {
	var out []Result
	each := func(f func(context.Context, Node) []Result) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		out = append(out, f(cctx, n)...)
	}
	each(checkHNS)
	each(checkOVSDB)
	each(checkBridges)
	each(checkOpenFlow)
	each(checkListeners)
	each(checkChassis)
	each(checkManagementPort)
	each(checkCNI)
	each(checkLeaks)
	return out
}

// Print writes the results, a line each and the fix below a failure, and returns how many
// failed.
func Print(w io.Writer, results []Result) int {
	failed := 0
	for _, r := range results {
		switch {
		case r.Skip != "":
			fmt.Fprintf(w, "SKIP  %-18s %s\n", r.Check, r.Skip)
		case r.OK:
			fmt.Fprintf(w, "OK    %-18s %s\n", r.Check, r.Detail)
		default:
			failed++
			fmt.Fprintf(w, "FAIL  %-18s %s\n", r.Check, r.Detail)
			fmt.Fprintf(w, "      fix: %s\n", r.Fix)
		}
	}
	fmt.Fprintf(w, "%d checks, %d failed\n", len(results), failed)
	return failed
}

// checkHNS: the Transparent network on the uplink adapter, with the OVS extension enabled.
func checkHNS(ctx context.Context, n Node) []Result {
	if n.HNS == nil {
		return []Result{skip("hns-network", "no HNS on this node (not Windows)")}
	}
	net, err := n.HNS.Network(ctx, n.Network)
	switch {
	case errors.Is(err, hns.ErrNotFound):
		return []Result{fail("hns-network", fmt.Sprintf("no HNS network %q", n.Network),
			"ovnt-node creates it at start-up once the master has given the node a subnet: read its log "+
				`(C:\ProgramData\ovn-transparent\logs\ovnt-node.log) for the preflight errors, and check --uplink-interface`),
			skip("ovs-extension", "no HNS network")}
	case err != nil:
		return []Result{fail("hns-network", err.Error(), "HNS does not answer: Restart-Service hns, then ovnt-node"),
			skip("ovs-extension", "no HNS network")}
	}
	var out []Result
	if net.Type != hns.TypeTransparent || net.Adapter != n.UplinkIface {
		out = append(out, fail("hns-network", fmt.Sprintf("%q is a %s network on adapter %q, want Transparent on %q", net.Name, net.Type, net.Adapter, n.UplinkIface),
			fmt.Sprintf("drain the node, remove the network (Get-HnsNetwork | ? Name -eq %q | Remove-HnsNetwork) and restart ovnt-node, or fix --uplink-interface", net.Name)))
	} else {
		subnets := make([]string, 0, len(net.Subnets))
		for _, s := range net.Subnets {
			subnets = append(subnets, s.Prefix.String())
		}
		out = append(out, ok("hns-network", fmt.Sprintf("%q Transparent on %q, subnets %v", net.Name, net.Adapter, subnets)))
	}
	if slices.Contains(net.Extensions, hns.OVSExtensionID) {
		out = append(out, ok("ovs-extension", "Open vSwitch Extension enabled on the network's switch"))
	} else {
		out = append(out, fail("ovs-extension", fmt.Sprintf("the Open vSwitch Extension is not enabled on %q (enabled: %v)", net.Name, net.Extensions),
			fmt.Sprintf("restart ovnt-node, which enables it; if it stays disabled, Get-VMSwitchExtension -VMSwitchName %q shows whether another forwarding extension is enabled", net.Name)))
	}
	return out
}

func checkOVSDB(_ context.Context, n Node) []Result {
	if n.Switch == nil {
		return []Result{fail("ovsdb", fmt.Sprintf("cannot reach the Open_vSwitch database: %v", n.SwitchErr),
			"start ovsdb-server; on Windows it must listen on --ovs-address: the Ansible role adds --remote=ptcp:6639:127.0.0.1 "+
				"to the ovsdb-server service (sc.exe qc ovsdb-server shows it)")}
	}
	return []Result{ok("ovsdb", "connected")}
}

// checkBridges: the uplink and, on Windows, the host vNIC are ports of the gateway bridge,
// and ovs-vswitchd opened them.
func checkBridges(ctx context.Context, n Node) []Result {
	if n.Switch == nil {
		return []Result{skip("uplink", "no Open_vSwitch database")}
	}
	if n.UplinkIface == "" {
		return []Result{skip("uplink", "no --uplink-interface: no gateway bridge")}
	}
	want := []string{n.UplinkIface}
	if n.HNS != nil {
		want = append(want, hns.HostVNIC(n.UplinkIface))
	}
	ports, err := n.Switch.BridgePorts(ctx, n.GatewayBridge)
	if err != nil {
		return []Result{fail("uplink", err.Error(), "ovnt-node creates "+n.GatewayBridge+" at start-up: read its log")}
	}
	have := map[string]ovs.Interface{}
	for _, p := range ports {
		for _, i := range p.Interfaces {
			have[i.Name] = i
		}
	}
	var problems []string
	for _, name := range want {
		i, found := have[name]
		switch {
		case !found:
			problems = append(problems, fmt.Sprintf("%q is not a port of %s", name, n.GatewayBridge))
		case i.Error != "":
			problems = append(problems, fmt.Sprintf("%q: ovs-vswitchd: %s", name, i.Error))
		case i.OFPort <= 0:
			problems = append(problems, fmt.Sprintf("%q has no OpenFlow port (ofport %d): ovs-vswitchd has not opened it", name, i.OFPort))
		}
	}
	if len(problems) > 0 {
		fix := "restart ovnt-node, which adds them"
		if n.HNS != nil {
			fix += "; if ofport stays -1 or unset, restart ovs-vswitchd (the OVS Windows datapath adds ports met before the extension was enabled only then)"
		}
		return []Result{fail("uplink", strings.Join(problems, "; "), fix)}
	}
	return []Result{ok("uplink", fmt.Sprintf("%v in %s, opened", want, n.GatewayBridge))}
}

func checkOpenFlow(ctx context.Context, n Node) []Result {
	if n.OpenFlow == nil {
		return []Result{skip("openflow", "not checked")}
	}
	bridges := []string{IntegrationBridge}
	if n.UplinkIface != "" {
		bridges = append(bridges, n.GatewayBridge)
	}
	var problems []string
	for _, b := range bridges {
		if err := n.OpenFlow(ctx, b); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", b, err))
		}
	}
	if len(problems) > 0 {
		return []Result{fail("openflow", strings.Join(problems, "; "),
			"ovs-vswitchd must run with the run directory ovnt-node is given (--ovs-rundir; on Windows the Ansible role sets OVS_RUNDIR "+
				"in the OVS services' environment): restart ovs-vswitchd, then ovnt-node")}
	}
	return []Result{ok("openflow", fmt.Sprintf("%v answer", bridges))}
}

// checkChassis: the chassis settings are in the local database and the SB knows the chassis.
func checkChassis(ctx context.Context, n Node) []Result {
	if n.Switch == nil {
		return []Result{skip("chassis", "no Open_vSwitch database")}
	}
	settings, err := n.Switch.ChassisSettings(ctx)
	if err != nil {
		return []Result{fail("chassis", err.Error(), "restart ovnt-node, which writes the chassis settings")}
	}
	id := settings["system-id"]
	if id == "" || settings["ovn-remote"] == "" || settings["ovn-encap-ip"] == "" {
		return []Result{fail("chassis", fmt.Sprintf("incomplete chassis settings %v", settings), "restart ovnt-node, which writes them")}
	}
	if n.SBChassis == nil {
		why := "SB not checked"
		if n.OVSDBListen != "" {
			why = "SB not checked from here: a remote chassis' SB identity is its remote ovn-controller's (see listeners; " +
				"`ovn-sbctl show` on the controllers' host lists the chassis)"
		}
		return []Result{ok("chassis", fmt.Sprintf("system-id %s, encap %s, %s", id, settings["ovn-encap-ip"], why))}
	}
	names, err := n.SBChassis(ctx)
	if err != nil {
		return []Result{fail("chassis", fmt.Sprintf("reading the Southbound database: %v", err),
			"check --sb-address and the TLS files (--sb-client-cert, --sb-client-key, --sb-ca-cert) and that the node reaches OVN central's port")}
	}
	if !slices.Contains(names, id) {
		return []Result{fail("chassis", fmt.Sprintf("the Southbound database has no chassis %q", id),
			"ovn-controller registers it: is it running for this node, with ovn-remote "+settings["ovn-remote"]+
				" and a certificate whose common name is the node name? (its log says)")}
	}
	return []Result{ok("chassis", fmt.Sprintf("%q registered in the Southbound database", id))}
}

func checkManagementPort(ctx context.Context, n Node) []Result {
	if n.Switch == nil {
		return []Result{skip("management-port", "no Open_vSwitch database")}
	}
	name := contract.MgmtIfName(n.Name)
	i, found := n.Switch.Interface(ctx, name)
	switch {
	case !found:
		return []Result{fail("management-port", fmt.Sprintf("no OVS interface %s", name),
			"ovnt-node adds it once the master has given the node a subnet: check the Node's annotations and ovnt-master's log")}
	case !i.Installed():
		return []Result{fail("management-port", fmt.Sprintf("%s is not installed by ovn-controller (error %q, ofport %d)", name, i.Error, i.OFPort),
			"ovn-controller must run for this chassis and reach the Southbound database (see chassis)")}
	}
	// OVS binds an internal interface to the first Hyper-V port of its name, or makes a
	// host vNIC of its own when there is none yet: then the endpoint's vNIC, which
	// holds the address, is not in the switch (review H1, N6).
	if n.HNS != nil {
		ep, err := n.HNS.Endpoint(ctx, name)
		if err != nil {
			return []Result{fail("management-port", fmt.Sprintf("HNS endpoint %s: %v", name, err), "restart ovnt-node, which creates it")}
		}
		if !strings.EqualFold(i.MACInUse, ep.MAC.String()) {
			return []Result{fail("management-port", fmt.Sprintf("OVS bound %s to a port with MAC %q, not the HNS endpoint's vNIC (MAC %s)", name, i.MACInUse, ep.MAC),
				fmt.Sprintf("remove the port (ovs-vsctl del-port br-int %s) and restart ovnt-node, which adds it again once the endpoint's vNIC exists", name))}
		}
	}
	if n.IP != nil {
		v, err := n.IP.Interface(ctx, hns.HostVNIC(name))
		if err != nil || len(v.Addrs) == 0 {
			return []Result{fail("management-port", fmt.Sprintf("host vNIC %q: %v, addresses %v", hns.HostVNIC(name), err, v.Addrs),
				"restart ovnt-node, which configures it")}
		}
		return []Result{ok("management-port", fmt.Sprintf("%s installed, bound to the endpoint's vNIC, %q has %v", name, hns.HostVNIC(name), v.Addrs))}
	}
	return []Result{ok("management-port", name+" installed")}
}

// checkCNI: the plugin and the configuration list are where the runtime looks, and the
// runtime can read the list's version.
func checkCNI(ctx context.Context, n Node) []Result {
	var out []Result
	bin := filepath.Join(n.CNIBinDir, cni.PluginType+n.ExeSuffix)
	if st, err := os.Stat(bin); err != nil || st.Size() == 0 {
		out = append(out, fail("cni-plugin", fmt.Sprintf("%s: %v", bin, err),
			"ovnt-node installs it at start-up from beside itself (--cni-plugin); check --cni-bin-dir is the runtime's CNI bin directory"))
	} else {
		out = append(out, ok("cni-plugin", bin))
	}
	path := filepath.Join(n.CNIConfDir, cni.ConfListName)
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &conf)
	}
	if err != nil {
		out = append(out, fail("cni-config", fmt.Sprintf("%s: %v", path, err),
			"ovnt-node writes it at start-up; check --cni-conf-dir is the runtime's CNI configuration directory"))
		return append(out, skip("cni-version", "no configuration list"))
	}
	// containerd (max_conf_num 1) and kubelet's dockershim load the first configuration
	// file by name: one sorting before ours wins, and pods get its network (review N5:
	// the 0-containerd-nat.json of the common containerd install scripts, HNS NAT).
	if first := cniConfsBefore(n.CNIConfDir, cni.ConfListName); len(first) > 0 {
		out = append(out, fail("cni-config", fmt.Sprintf("%v in %s sort before %s: the runtime loads the first file by name, so pods get that network, not OVN",
			first, n.CNIConfDir, cni.ConfListName), "remove them (the windows_node role removes 0-containerd-nat.json), then restart containerd"))
		return append(out, skip("cni-version", "another configuration is in force"))
	}
	out = append(out, ok("cni-config", fmt.Sprintf("%s (network %q, cniVersion %s)", path, conf.Name, conf.CNIVersion)))
	if n.Runtime == nil {
		return append(out, skip("cni-version", "the Node's runtime is not known (no API server)"))
	}
	rt, err := n.Runtime(ctx)
	if err != nil {
		return append(out, fail("cni-version", fmt.Sprintf("reading the Node's runtime: %v", err), "check --kubeconfig"))
	}
	if err := RuntimeReads(rt, conf.CNIVersion); err != nil {
		return append(out, fail("cni-version", err.Error(), "upgrade ovnt-node (it writes cniVersion "+cni.ConfListVersion+") or the runtime"))
	}
	return append(out, ok("cni-version", fmt.Sprintf("%s reads cniVersion %s", rt, conf.CNIVersion)))
}

// RuntimeReads says whether the runtime (as kubelet reports it, "containerd://1.7.20")
// can call a configuration list of cniVersion: containerd before 2.0 is built on libcni
// 1.1, which knows results only up to 1.0.0 and fails every ADD of a list asking for more.
func RuntimeReads(runtime, cniVersion string) error {
	name, version, found := strings.Cut(runtime, "://")
	if !found {
		return fmt.Errorf("runtime %q: not name://version", runtime)
	}
	if name != "containerd" {
		if name == "docker" {
			return fmt.Errorf("runtime %q: Docker (cri-dockerd) passes no HCN namespace; ovn-transparent needs containerd", runtime)
		}
		return nil // CRI-O and others: not known to be limited
	}
	major, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(version, ".", 2)[0], "v"))
	if err != nil {
		return fmt.Errorf("runtime %q: unreadable version", runtime)
	}
	if major < 2 && versionAbove(cniVersion, "1.0.0") {
		return fmt.Errorf("%s (libcni 1.1) fails every ADD of a configuration list with cniVersion %s (at most 1.0.0)", runtime, cniVersion)
	}
	return nil
}

// versionAbove compares dotted versions numerically.
func versionAbove(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x > y
		}
	}
	return false
}

// checkLeaks: HNS endpoints of pods with no OVS port (DEL lost, or an HNS deletion that
// hung), which the agent's collector removes on its timer.
func checkLeaks(ctx context.Context, n Node) []Result {
	if n.HNS == nil {
		return []Result{skip("leaked-endpoints", "no HNS on this node (not Windows)")}
	}
	if n.Switch == nil {
		return []Result{skip("leaked-endpoints", "no Open_vSwitch database")}
	}
	net, err := n.HNS.Network(ctx, n.Network)
	if err != nil {
		return []Result{skip("leaked-endpoints", "no HNS network")}
	}
	eps, err := n.HNS.ListEndpoints(ctx, net.ID)
	if err != nil {
		return []Result{fail("leaked-endpoints", err.Error(), "HNS does not answer: Restart-Service hns")}
	}
	var leaked []string
	pods := 0
	for _, e := range eps {
		if !hostnet.IsPodIfName(e.Name) {
			continue
		}
		pods++
		if _, found := n.Switch.Interface(ctx, e.Name); !found {
			leaked = append(leaked, e.Name)
		}
	}
	if len(leaked) > 0 {
		return []Result{fail("leaked-endpoints", fmt.Sprintf("%d of %d pod endpoints have no OVS port: %v", len(leaked), pods, leaked),
			"the agent's collector removes them within two --leak-collect-interval periods; by hand: Get-HnsEndpoint | ? Name -eq <name> | Remove-HnsEndpoint")}
	}
	return []Result{ok("leaked-endpoints", fmt.Sprintf("%d pod endpoints, each with its OVS port", pods))}
}

// cniConfsBefore returns the configuration files in dir (libcni's extensions .conf,
// .conflist and .json) that sort before ours.
func cniConfsBefore(dir, ours string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries { // sorted by name
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
		default:
			continue
		}
		if e.Name() >= ours {
			break
		}
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkListeners: a remote chassis' database and br-int listen for the remote
// ovn-controller. ovsdb-server serves the database's (a Manager row) only when started
// with --remote=db:Open_vSwitch,Open_vSwitch,manager_options, which the OVS MSI's service
// is not (review N1); ovs-vswitchd opens br-int's (a passive controller) itself.
func checkListeners(ctx context.Context, n Node) []Result {
	if n.OVSDBListen == "" {
		return []Result{skip("listeners", "not a remote chassis (no --ovsdb-listen)")}
	}
	if n.Switch == nil {
		return []Result{skip("listeners", "no Open_vSwitch database")}
	}
	var problems []string
	fix := ""
	port, err := n.Switch.ManagerListening(ctx, n.OVSDBListen)
	if err != nil {
		problems = append(problems, err.Error())
		fix = "on Windows run the windows_node role again (it adds --remote=db:Open_vSwitch,Open_vSwitch,manager_options to the ovsdb-server " +
			"service's binary path, which an Open vSwitch MSI upgrade resets; sc.exe qc ovsdb-server shows it), then Restart-Service ovsdb-server"
	} else if err := dialListener(ctx, n.OVSDBListen, port); err != nil {
		problems = append(problems, err.Error())
	}
	if err := dialListener(ctx, n.OpenFlowListen, 0); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		if fix == "" {
			fix = "restart ovnt-node, which writes the listeners; the TLS files are on the OVS services' command lines (the windows_node role)"
		}
		return []Result{fail("listeners", strings.Join(problems, "; "), fix)}
	}
	return []Result{ok("listeners", fmt.Sprintf("%s and %s accept connections", n.OVSDBListen, n.OpenFlowListen))}
}

// dialListener connects to the passive target ("pssl:6640[:IP]") at its address, or at
// the loopback address when it listens on every one; port, if not 0, replaces the
// target's (an ephemeral one).
func dialListener(ctx context.Context, target string, port int) error {
	_, rest, _ := strings.Cut(target, ":")
	p, ip, _ := strings.Cut(rest, ":")
	ip = strings.Trim(ip, "[]")
	if ip == "" || ip == "0.0.0.0" || ip == "::" {
		ip = "127.0.0.1"
	}
	if port != 0 {
		p = strconv.Itoa(port)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(ip, p))
	if err != nil {
		return fmt.Errorf("%s: nothing accepts connections: %w", target, err)
	}
	return c.Close()
}
