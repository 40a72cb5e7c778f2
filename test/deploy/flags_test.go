//go:build linux

package deploy

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
)

// TestManifestsFlags gives each OVNT_* variable of the workloads, with its value (from the
// ConfigMap where it comes from there), to the binary the container runs as the flag it
// stands for: a misspelt or removed flag, or a value of the wrong type, fails here rather
// than on a node. The Windows container is checked against the Linux build of ovnt-node: both
// have the flags of node/config.go.
func TestManifestsFlags(t *testing.T) {
	testenv.Integration(t) // builds and runs the binaries: tens of seconds
	binDir, err := cluster.BinDir(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	all, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	config, _, _ := unstructured.NestedStringMap(findObject(t, all, "ConfigMap", "ovnt-config").Object, "data")
	checked := 0
	for _, o := range all {
		containers, found, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if !found {
			continue
		}
		for _, c := range containers {
			cm := c.(map[string]any)
			bin := binaryOf(cm)
			if bin != "ovnt-master" && bin != "ovnt-node" {
				continue
			}
			// A subcommand (ovnt-node remote-controllers) comes before its flags.
			args := subcommand(cm)
			health := ""
			envs, _ := cm["env"].([]any)
			for _, e := range envs {
				em := e.(map[string]any)
				name := em["name"].(string)
				if !strings.HasPrefix(name, "OVNT_") {
					continue
				}
				value, ok := em["value"].(string)
				if !ok {
					key, found, _ := unstructured.NestedString(em, "valueFrom", "configMapKeyRef", "key")
					value, ok = config[key]
					if !found || !ok {
						value = "node1" // from the downward API: the node name
					}
				}
				flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "OVNT_"), "_", "-"))
				args = append(args, "--"+flag+"="+value)
				if flag == "health-address" {
					health = value
				}
			}
			// What a Windows agent cannot start or work without (review C4): its adapter,
			// the host OVS's loopback listener and its run directory.
			if o.GetName() == "ovnt-node-windows" {
				for _, f := range []string{"--uplink-interface=Ethernet0", "--ovs-address=tcp:127.0.0.1:6639", `--ovs-rundir=C:\ProgramData\openvswitch`} {
					if !slices.Contains(args, f) {
						t.Errorf("the Windows DaemonSet does not give %s (flags %v)", f, args)
					}
				}
				for _, e := range remoteChassisFlagErrors(args) {
					t.Errorf("the Windows DaemonSet: %s (flags %v)", e, args)
				}
			}
			// --help after the flags: they are parsed (and refused if unknown or of the wrong
			// type), then the binary prints its help instead of running.
			out, err := exec.CommandContext(t.Context(), filepath.Join(binDir, bin), append(args, "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s container %s: %s %v: %v\n%s", o.GetKind(), o.GetName(), cm["name"], bin, args, err, firstLine(out))
			}
			if health == "" {
				health = flagDefault(string(out), "health-address")
			}
			checkProbes(t, o.GetKind()+" "+o.GetName(), cm, health)
			checked++
		}
	}
	if checked != 4 {
		t.Errorf("checked %d containers running ovnt-master or ovnt-node, want 4 (master, Linux node, Windows node, remote controllers)", checked)
	}
}

// binaryOf names the ovn-transparent binary a container runs, from its command.
func binaryOf(c map[string]any) string {
	cmd, _ := c["command"].([]any)
	for _, a := range cmd {
		s, _ := a.(string)
		for _, bin := range []string{"ovnt-master", "ovnt-node"} {
			if strings.HasSuffix(s, "/"+bin) || strings.Contains(s, `\`+bin+".exe") {
				return bin
			}
		}
	}
	return ""
}

// subcommand is what a container's command gives after the binary ([remote-controllers] for
// ovnt-node remote-controllers); nil for a command that is the binary alone.
func subcommand(c map[string]any) []string {
	cmd, _ := c["command"].([]any)
	for i, a := range cmd {
		if binaryOf(map[string]any{"command": []any{a}}) == "" {
			continue
		}
		var args []string
		for _, rest := range cmd[i+1:] {
			s, _ := rest.(string)
			args = append(args, s)
		}
		return args
	}
	return nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// flagDefault is the default of --name as a binary's --help prints it ("" if none).
func flagDefault(help, name string) string {
	for _, l := range strings.Split(help, "\n") {
		if !strings.Contains(l, "--"+name+" ") {
			continue
		}
		_, rest, ok := strings.Cut(l, `(default: "`)
		if v, _, ok2 := strings.Cut(rest, `")`); ok && ok2 {
			return v
		}
	}
	return ""
}

// checkProbes: kubelet probes the container's liveness on /healthz and readiness on /readyz
// at the address the daemon serves them on (health, host:port, from its flag).
func checkProbes(t *testing.T, what string, c map[string]any, health string) {
	t.Helper()
	host, port, err := net.SplitHostPort(health)
	if err != nil {
		t.Errorf("%s: health address %q: %v", what, health, err)
		return
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		get, found, _ := unstructured.NestedMap(c, probe, "httpGet")
		if !found {
			t.Errorf("%s container %s: no %s httpGet (the daemon serves %s on %s)", what, c["name"], probe, path, health)
			continue
		}
		if get["path"] != path || fmt.Sprint(get["port"]) != port || get["host"] != host {
			t.Errorf("%s container %s: %s gets %v:%v%v, want %s:%s%s", what, c["name"], probe, get["host"], get["port"], get["path"], host, port, path)
		}
	}
}

// remoteChassisFlagErrors: a Windows node is a remote chassis (docs/remote-chassis.md): the
// agent opens the database's and br-int's listeners with TLS (pssl:), plain TCP only with
// --listen-plaintext, and gives no SB identity of its own (the agent refuses both together).
func remoteChassisFlagErrors(args []string) []string {
	flags := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[name] = value
	}
	plaintext := flags["listen-plaintext"] == "true"
	var errs []string
	for _, f := range []string{"ovsdb-listen", "openflow-listen"} {
		v := flags[f]
		switch {
		case v == "":
			errs = append(errs, "no --"+f+": the node's ovn-controller runs on another host")
		case strings.HasPrefix(v, "ptcp:") && !plaintext:
			errs = append(errs, "--"+f+"="+v+" without --listen-plaintext")
		case !strings.HasPrefix(v, "pssl:") && !strings.HasPrefix(v, "ptcp:"):
			errs = append(errs, "--"+f+"="+v+" is not pssl:PORT[:IP]")
		}
	}
	for _, f := range []string{"sb-client-cert", "sb-client-key", "sb-ca-cert"} {
		if _, ok := flags[f]; ok {
			errs = append(errs, "--"+f+": a remote chassis' SB identity is its remote controller's")
		}
	}
	return errs
}

// TestRemoteChassisFlagErrors: the check above refuses what the agent would refuse or what
// would open the node to the network, and lets the two supported forms through.
func TestRemoteChassisFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		errs int
	}{
		{[]string{"--ovsdb-listen=pssl:6640", "--openflow-listen=pssl:6653"}, 0},
		{[]string{"--ovsdb-listen=ptcp:6640", "--openflow-listen=ptcp:6653", "--listen-plaintext=true"}, 0},
		{[]string{"--ovsdb-listen=ptcp:6640", "--openflow-listen=pssl:6653", "--listen-plaintext=false"}, 1},
		{[]string{"--ovsdb-listen=ptcp:6640", "--openflow-listen=ptcp:6653"}, 2},
		{[]string{"--ovsdb-listen=tcp:1.2.3.4:6640", "--openflow-listen=pssl:6653"}, 1},
		{[]string{"--openflow-listen=pssl:6653", "--sb-client-cert=a", "--sb-client-key=b", "--sb-ca-cert=c"}, 4},
		{nil, 2},
	} {
		if errs := remoteChassisFlagErrors(c.args); len(errs) != c.errs {
			t.Errorf("%v: %d errors %q, want %d", c.args, len(errs), errs, c.errs)
		}
	}
}
