//go:build linux

package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

func TestRunCloseRemovesEverything(t *testing.T) {
	Require(t, "ip", "sleep")
	t.Setenv(keepLogsEnv, "") // this test is about what a passing run leaves: nothing
	r, err := NewRun(Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ns, err := r.AddNetns("a")
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Start(ProcSpec{Name: "sleeper", Netns: ns, Path: "sleep", Args: []string{"300"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ProcSpec{Name: "sleeper", Path: "sleep", Args: []string{"1"}}); err == nil {
		t.Fatal("second process with the same name was accepted")
	}
	out, err := Exec(context.Background(), ns, "ip", "-o", "link")
	if err != nil || !strings.Contains(out, "lo:") {
		t.Fatalf("ip link in %s: %v %q", ns, err, out)
	}
	cleaned := false
	r.AddCleanup("flag", func() error { cleaned = true; return nil })
	pid := p.Pid()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !cleaned {
		t.Error("cleanup did not run")
	}
	if netnsExists(ns) {
		t.Errorf("netns %s still exists", ns)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("process %d still alive", pid)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("run dir %s still exists: %v", r.Dir, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestFailedRunKeepsLogs(t *testing.T) {
	Require(t, "ip", "sh")
	r, err := NewRun(Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Start(ProcSpec{Name: "talker", Path: "sh", Args: []string{"-c", "echo hello-from-$((6*7)); sleep 300"}})
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	_ = p
	log := filepath.Join(r.LogDir, "talker.out")
	t.Cleanup(func() { r.Close() }) // a no-op once the test has closed it
	poll.Eventually(t, context.Background(), "talker output", 0, 50*time.Millisecond, func() (bool, error) {
		b, err := os.ReadFile(log)
		return strings.Contains(string(b), "\nhello-from-42\n"), err
	})
	r.MarkFailed()
	r.Close()
	defer os.RemoveAll(r.Dir)
	b, err := os.ReadFile(log)
	if err != nil || !strings.Contains(string(b), "\nhello-from-42\n") {
		t.Fatalf("log of failed run not kept: %v %q", err, b)
	}
	entries, _ := os.ReadDir(r.Dir)
	if len(entries) != 1 {
		t.Errorf("failed run dir should hold only logs/, has %d entries", len(entries))
	}
}

// TestKeepLogsFromEnvironment: OVNT_KEEP_LOGS keeps a passing run's logs, whoever made the
// run; no caller reads the variable itself.
func TestKeepLogsFromEnvironment(t *testing.T) {
	Require(t, "sh")
	t.Setenv(keepLogsEnv, "1")
	r, err := NewRun(Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(r.Dir)
	if err := os.WriteFile(filepath.Join(r.LogDir, "note.log"), []byte("kept\n"), 0o644); err != nil {
		r.Close()
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(r.LogDir, "note.log")); err != nil || string(b) != "kept\n" {
		t.Errorf("log of a passing run with %s=1: %v %q", keepLogsEnv, err, b)
	}
}

// TestKilledRunIsReaped SIGKILLs a process in the middle of a run, as a crash, an OOM kill or
// a CI timeout would, and checks the reaper leaves no namespace and no process behind.
func TestKilledRunIsReaped(t *testing.T) {
	Require(t, "ip", "sleep")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "OVNT_HARNESS_VICTIM=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ns, dir string
	var pid int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "VICTIM %s %d %s", &ns, &pid, &dir); err == nil {
			break
		}
	}
	if ns == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("victim did not report its namespace")
	}
	if !netnsExists(ns) || syscall.Kill(pid, 0) != nil {
		t.Fatalf("victim's namespace %s or process %d not up", ns, pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	defer os.RemoveAll(dir) // the reaper keeps a killed run's logs
	poll.Eventually(t, context.Background(), "reaper to remove "+ns+" and kill its daemon", 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		return !netnsExists(ns) && syscall.Kill(pid, 0) != nil, nil
	})
}

// TestMain runs the victim instead of the tests when TestKilledRunIsReaped re-executes the
// test binary.
func TestMain(m *testing.M) {
	if os.Getenv("OVNT_HARNESS_VICTIM") == "1" {
		victim()
		return
	}
	os.Exit(m.Run())
}

// victim starts a run with a namespace and a daemon, reports them, and waits to be killed.
func victim() {
	r, err := NewRun(Options{})
	if err != nil {
		fmt.Println("VICTIM-ERROR", err)
		os.Exit(1)
	}
	ns, err := r.AddNetns("victim")
	if err != nil {
		fmt.Println("VICTIM-ERROR", err)
		os.Exit(1)
	}
	p, err := r.Start(ProcSpec{Name: "sleeper", Netns: ns, Path: "sleep", Args: []string{"300"}})
	if err != nil {
		fmt.Println("VICTIM-ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("VICTIM %s %d %s\n", ns, p.Pid(), r.Dir)
	time.Sleep(5 * time.Minute)
}
