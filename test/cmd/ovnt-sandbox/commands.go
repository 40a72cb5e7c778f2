//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// up starts `serve` in its own session, waits until it has written its state (or died), and
// prints the sandbox. A sandbox already running is shown, not started twice.
func up(c *cli.Context) error {
	dir := c.String("state-dir")
	if s, err := readState(dir); err == nil {
		fmt.Printf("sandbox already running (pid %d, run %s)\n", s.PID, s.RunID)
		return show(c.Context, s)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "sandbox.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "--state-dir", dir, "serve", "--nodes", fmt.Sprint(c.Int("nodes")))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and the terminal
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting the sandbox (log: %s); the first start builds Kubernetes and takes minutes\n", logPath)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("sandbox failed to start (%v):\n%s", err, tail(string(b), 40))
		case <-tick.C:
			if s, err := readState(dir); err == nil && s.PID == cmd.Process.Pid {
				return show(c.Context, s)
			}
		}
	}
}

// serve builds the sandbox in a harness run and holds it until SIGTERM or SIGINT.
func serve(c *cli.Context) error {
	dir, err := filepath.Abs(c.String("state-dir"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	r, err := harness.NewRun(harness.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer r.Close()
	cl, s, err := build(ctx, r, dir, c.Int("nodes"))
	if err != nil {
		r.MarkFailed()
		return err
	}
	s.PID, s.RunID = os.Getpid(), r.ID
	defer os.Remove(statePath(dir))
	logf("sandbox ready")
	// Pods come and go (kubectl works against the sandbox): keep the pod -> namespace map of
	// the state file current for `exec <namespace>/<pod>`.
	for {
		s.Pods = podNetns(ctx, cl)
		if err := writeState(dir, s); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			continue
		}
		break
	}
	logf("stopping the sandbox")
	return nil
}

// build starts the whole cluster (control plane, OVN, master, node agents, the real kubelet
// and containerd on every node, cluster DNS) with the binaries beside this one, and the
// sample workloads.
func build(ctx context.Context, r *harness.Run, dir string, nodes int) (*cluster.Cluster, state, error) {
	s := state{Netns: map[string]string{}}
	self, err := os.Executable()
	if err != nil {
		return nil, s, err
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node%d", i+1)
	}
	c, err := cluster.Start(ctx, r, cluster.Options{Nodes: names, BinDir: filepath.Dir(self), RealNodes: true})
	if err != nil {
		return nil, s, err
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := copyFile(c.Kube.Kubeconfig, s.Kubeconfig); err != nil {
		return nil, s, err
	}
	s.NBRemote, s.SBRemote = c.Central.NBRemote, c.Central.SBRemote
	s.NBMasterRemote, s.SBChassisRemote, s.PKIDir = c.Central.NBMasterRemote, c.Central.SBChassisRemote, c.Central.PKI.Dir
	for _, n := range c.Nodes {
		s.Netns["node/"+n.Name] = "/run/netns/" + n.Netns
	}
	s.Netns["external"] = "/run/netns/" + c.External.Netns
	if s.Kubectl, err = kubectlPath(ctx); err != nil {
		return nil, s, err
	}
	if err := createSamples(ctx, c); err != nil {
		return nil, s, err
	}
	return c, s, nil
}

// down stops the serve process and waits until it has torn the sandbox down.
func down(c *cli.Context) error {
	s, err := readState(c.String("state-dir"))
	if errors.Is(err, errNotRunning) {
		fmt.Println("no sandbox is running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for alive(s.PID) {
		if time.Now().After(deadline) {
			syscall.Kill(s.PID, syscall.SIGKILL) // its daemons die with it; the reaper deletes the namespaces
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("sandbox %s stopped\n", s.RunID)
	return nil
}

func status(c *cli.Context) error {
	s, err := readState(c.String("state-dir"))
	if err != nil {
		return err
	}
	return show(c.Context, s)
}

// show prints what an operator would look at first.
func show(ctx context.Context, s state) error {
	fmt.Printf("\nsandbox run %s (pid %d)\n  kubeconfig: %s\n  NB: %s (master: %s)\n  SB: %s (chassis, role ovn-controller: %s)\n  certificates: %s\n",
		s.RunID, s.PID, s.Kubeconfig, s.NBRemote, s.NBMasterRemote, s.SBRemote, s.SBChassisRemote, s.PKIDir)
	for k, ns := range s.Netns {
		fmt.Printf("  %-12s netns %s\n", k, ns)
	}
	for _, cmd := range [][]string{
		{"ovn-sbctl", "--db=" + s.SBRemote, "show"},
		{"ovn-nbctl", "--db=" + s.NBRemote, "show"},
		{"ovn-nbctl", "--db=" + s.NBRemote, "lb-list"},
		// The sample NetworkPolicy's ACLs, on its port group.
		{"ovn-nbctl", "--db=" + s.NBRemote, "acl-list", netpol.PortGroupName("demo/" + samplePolicy)},
	} {
		out, err := harness.Exec(ctx, "", cmd[0], cmd[1:]...)
		if err != nil {
			return err
		}
		fmt.Printf("\n$ %s %s\n%s", cmd[0], strings.Join(cmd[2:], " "), out)
	}
	connectivity(ctx, s)
	dnsCheck(ctx, s)
	fmt.Printf("\n_output/bin/kubectl --kubeconfig %s get pods -A -o wide\n", s.Kubeconfig)
	fmt.Printf("_output/bin/kubectl --kubeconfig %s exec -n demo-client client -- curl -s http://web.demo/hostname\n", s.Kubeconfig)
	fmt.Println("_output/bin/ovnt-sandbox exec demo-client/client -- ip addr")
	fmt.Println("stop it with: make sandbox-down")
	return nil
}

// execCmd runs a host command inside a pod's, a node's or the external host's network
// namespace (nsenter --net), with this terminal's standard streams: the host's tools, which
// the pod's image may not have, next to kubectl exec, which runs the pod's own.
func execCmd(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) < 2 {
		return fmt.Errorf("usage: ovnt-sandbox exec <namespace>/<pod>|node/<name>|external -- COMMAND [ARGS...]")
	}
	target, cmdline := args[0], args[1:]
	if cmdline[0] == "--" {
		cmdline = cmdline[1:]
	}
	s, err := readState(c.String("state-dir"))
	if err != nil {
		return err
	}
	ns, ok := s.Netns[target]
	if !ok {
		ns, ok = s.Pods[target]
	}
	if !ok {
		known := make([]string, 0, len(s.Netns)+len(s.Pods))
		for k := range s.Netns {
			known = append(known, k)
		}
		for k := range s.Pods {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("unknown target %q (known: %s)", target, strings.Join(known, ", "))
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + ns, "--"}, cmdline...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode()) // the command's own status, as `kubectl exec` passes it on
	}
	return err
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dnsCheck resolves the sample Service through cluster DNS from inside the client pod
// (kubectl exec: the pod's own resolver), and fetches from it by its namespace-qualified
// name (the pod's search list).
func dnsCheck(ctx context.Context, s state) {
	// getent and curl resolve through the C library, with the pod's search list.
	for _, cmd := range [][]string{{"getent", "hosts", "web.demo"}, {"curl", "-s", "-m", "5", "http://web.demo/hostname"}} {
		fmt.Printf("\n$ kubectl exec -n demo-client client -- %s\n", strings.Join(cmd, " "))
		args := append([]string{"--kubeconfig", s.Kubeconfig, "exec", "-n", "demo-client", "client", "--"}, cmd...)
		out, err := exec.CommandContext(ctx, s.Kubectl, args...).CombinedOutput()
		if err != nil {
			fmt.Printf("  %s: FAILED: %v\n%s", strings.Join(cmd, " "), err, out)
			continue
		}
		fmt.Printf("%s", out)
	}
}

// kubectlPath is the kubectl the harness built.
func kubectlPath(ctx context.Context) (string, error) {
	dir, err := harness.EnsureKubeBinaries(ctx, harness.KubeVersion, nil)
	return filepath.Join(dir, "kubectl"), err
}
