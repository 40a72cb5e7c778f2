//go:build linux

package deployreal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestAnsibleCentral runs playbooks/ovn_central.yml over SSH against three machines
// (systemd as PID 1, see machine), as an operator's Ansible controller on the same network
// would: a 3-member RAFT cluster of the NB and SB with TLS. The second run changes nothing
// (changed=0 on every host). Then the NB's RAFT leader's machine is killed: the other two
// elect a leader and the NB takes writes.
//
// Opt-in (about a minute and a half, and a root filesystem of about 360 MB made once in
// about two minutes): make deploy-test sets OVNT_ANSIBLE_MACHINES=1.
func TestAnsibleCentral(t *testing.T) {
	requireMachines(t, "ansible-playbook")
	rootfs := machineRootfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	a, pub := newController(ctx, t, r)
	start := time.Now()
	var machines []*machine
	for _, name := range []string{"central1", "central2", "central3"} {
		m, err := startMachine(ctx, r, name, rootfs, pub)
		if err != nil {
			t.Fatal(err)
		}
		machines = append(machines, m)
	}
	t.Logf("3 machines booted (systemd, sshd) in %s", time.Since(start).Round(time.Second))
	inv := a.inventory(machines)

	a.playbookTwice(ctx, inv, "playbooks/ovn_central.yml", machines)

	// Every member in both clusters; one leader.
	leader := -1
	for i, m := range machines {
		for _, db := range []string{"ovnnb_db:OVN_Northbound", "ovnsb_db:OVN_Southbound"} {
			ctl, name, _ := strings.Cut(db, ":")
			out := a.ssh(ctx, m, "ovn-appctl", "-t", "/var/run/ovn/"+ctl+".ctl", "cluster/status", name)
			if !strings.Contains(out, "Status: cluster member") || strings.Count(out, "(self)") != 1 {
				t.Errorf("%s: %s: %s", m.name, name, out)
			}
			if name == "OVN_Northbound" && strings.Contains(out, "Role: leader") {
				leader = i
			}
		}
	}
	if leader < 0 {
		t.Fatal("no NB leader")
	}
	// Every remote probes its silent clients after 60 s, not OVN's 5 s.
	for _, ctl := range []string{"ovn-nbctl", "ovn-sbctl"} {
		out := a.ssh(ctx, machines[0], ctl, "--no-leader-only", "--format=csv", "--data=bare", "--no-headings",
			"--columns=target,inactivity_probe", "list", "Connection")
		rows := strings.Fields(out)
		if len(rows) == 0 {
			t.Errorf("%s: no Connection rows", ctl)
		}
		for _, row := range rows {
			if !strings.HasSuffix(row, ",60000") {
				t.Errorf("%s: Connection %s: want inactivity_probe 60000", ctl, row)
			}
		}
	}
	if out := a.ssh(ctx, machines[0], "ovn-nbctl", "--no-leader-only", "ls-add", "before-failover"); strings.TrimSpace(out) != "" {
		t.Logf("ls-add: %s", out)
	}
	dead := machines[leader]
	dead.boot.Stop()
	t.Logf("killed %s, the NB leader", dead.name)
	survivor := machines[(leader+1)%3]
	poll.Eventually(t, ctx, "a new NB leader among the two left", 2*time.Minute, 2*time.Second, func() (bool, error) {
		for _, m := range machines {
			if m == dead {
				continue
			}
			if strings.Contains(a.trySSH(ctx, m, "ovn-appctl", "-t", "/var/run/ovn/ovnnb_db.ctl", "cluster/status", "OVN_Northbound"), "Role: leader") {
				return true, nil
			}
		}
		return false, nil
	})
	// A follower forwards a write to the leader: --no-leader-only lets ovn-nbctl use the
	// local server whatever its role.
	a.ssh(ctx, survivor, "ovn-nbctl", "--no-leader-only", "--timeout=30", "ls-add", "after-failover")
	if out := a.ssh(ctx, survivor, "ovn-nbctl", "--no-leader-only", "ls-list"); !strings.Contains(out, "before-failover") || !strings.Contains(out, "after-failover") {
		t.Errorf("NB after the failover: %s", out)
	}
}

// controller runs Ansible from a network namespace on the underlay.
type controller struct {
	t     *testing.T
	netns string
	ip    string // its address on the underlay
	key   string
	dir   string
}

// newController makes an SSH key and starts the controller's namespace (the external host's,
// on the underlay like the machines); it returns the controller and the public key.
func newController(ctx context.Context, t *testing.T, r *harness.Run) (*controller, string) {
	key := r.Path("ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	ext, err := r.StartExternalHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &controller{t: t, netns: ext.Netns, ip: ext.IP, key: key, dir: r.Path("ansible")}, string(pub)
}

// inventory writes an inventory of the machines as the ovn_central group.
func (a *controller) inventory(ms []*machine) string {
	return a.inventoryOf([]group{{"ovn_central", ms}}, nil)
}

// group is an inventory group of machines.
type group struct {
	name     string
	machines []*machine
}

// inventoryOf writes an inventory of the groups, with vars for all hosts.
func (a *controller) inventoryOf(groups []group, vars map[string]string) string {
	var b strings.Builder
	b.WriteString("all:\n  vars:\n    ansible_user: root\n    ansible_python_interpreter: /usr/bin/python3\n")
	fmt.Fprintf(&b, "    ansible_ssh_private_key_file: %s\n", a.key)
	b.WriteString("    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\n")
	for k, v := range vars {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	b.WriteString("  children:\n")
	for _, g := range groups {
		fmt.Fprintf(&b, "    %s:\n      hosts:\n", g.name)
		for _, m := range g.machines {
			fmt.Fprintf(&b, "        %s: {ansible_host: %s}\n", m.name, m.ip)
		}
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		a.t.Fatal(err)
	}
	path := filepath.Join(a.dir, "hosts.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		a.t.Fatal(err)
	}
	return path
}

var recapLine = regexp.MustCompile(`(?m)^(\S+)\s+:\s+(.*)$`)

// playbook runs a playbook of ansible/ and returns the PLAY RECAP: per host, its counters.
func (a *controller) playbook(ctx context.Context, inventory, playbook string) map[string]map[string]string {
	a.t.Helper()
	dir, err := filepath.Abs("../../ansible")
	if err != nil {
		a.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", a.netns, "ansible-playbook", "-i", inventory, playbook)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"), "ANSIBLE_NOCOLOR=1", "ANSIBLE_HOST_KEY_CHECKING=False")
	out, err := cmd.CombinedOutput()
	log := filepath.Join(a.dir, strings.ReplaceAll(filepath.Base(playbook), ".yml", "")+fmt.Sprintf("-%d.out", time.Now().UnixNano()))
	os.WriteFile(log, out, 0o644)
	if err != nil {
		a.t.Fatalf("ansible-playbook %s: %v\n%s", playbook, err, tail(string(out), 60))
	}
	_, recap, ok := strings.Cut(string(out), "PLAY RECAP")
	if !ok {
		a.t.Fatalf("ansible-playbook %s: no PLAY RECAP\n%s", playbook, tail(string(out), 60))
	}
	hosts := map[string]map[string]string{}
	for _, m := range recapLine.FindAllStringSubmatch(recap, -1) {
		st := map[string]string{}
		for _, kv := range strings.Fields(m[2]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				st[k] = v
			}
		}
		hosts[m[1]] = st
	}
	return hosts
}

// ssh runs a command on a machine as root; a failure fails the test.
func (a *controller) ssh(ctx context.Context, m *machine, args ...string) string {
	a.t.Helper()
	out, err := a.sshCmd(ctx, m, args...).CombinedOutput()
	if err != nil {
		a.t.Fatalf("ssh %s %s: %v: %s", m.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// trySSH is ssh without failing: the output, empty on an error.
func (a *controller) trySSH(ctx context.Context, m *machine, args ...string) string {
	out, err := a.sshCmd(ctx, m, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

func (a *controller) sshCmd(ctx context.Context, m *machine, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", a.netns, "ssh", "-i", a.key,
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
		"root@" + m.ip}, args...)...)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
