//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/ovn-transparent/ovn-transparent/internal/netns"
	"golang.org/x/sys/unix"
)

// AddNetns creates the network namespace r.Name(short), brings its loopback up, and
// registers it for deletion at Close. It returns the full name.
func (r *Run) AddNetns(short string) (string, error) {
	name := r.Name(short)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip netns add %s: %v: %s", name, err, out)
	}
	r.mu.Lock()
	r.netns = append(r.netns, name)
	r.mu.Unlock()
	if _, err := Exec(context.Background(), name, "ip", "link", "set", "lo", "up"); err != nil {
		return "", err
	}
	return name, nil
}

func deleteNetns(name string) error {
	// Processes still inside keep the namespace alive after `ip netns del`; kill them first.
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid != os.Getpid() {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, out)
	}
	return nil
}

// Exec runs a short command (in netns if not empty) and returns its combined output; the
// error includes the command line and the output. netns is a name under /run/netns or, for
// a namespace made elsewhere (a real node's pod sandbox), the path of one.
func Exec(ctx context.Context, netns string, name string, args ...string) (string, error) {
	switch {
	case strings.HasPrefix(netns, "/"):
		name, args = "nsenter", append([]string{"--net=" + netns, "--", name}, args...)
	case netns != "":
		name, args = "ip", append([]string{"netns", "exec", netns, name}, args...)
	}
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// InNetns runs fn on an OS thread switched into the named network namespace (netns.Do): on a
// thread of its own, so that the caller's goroutine never runs in the wrong namespace, even
// when switching back fails. Sockets fn opens stay in that namespace after it returns. Like
// Exec, it also takes the path of a namespace.
func InNetns(name string, fn func() error) error {
	if strings.HasPrefix(name, "/") {
		return netns.Do(name, fn)
	}
	return netns.Do("/run/netns/"+name, fn)
}
