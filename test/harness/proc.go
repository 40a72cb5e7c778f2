//go:build linux

package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProcSpec describes a daemon to start.
type ProcSpec struct {
	// Name is unique within the run; output goes to <LogDir>/<Name>.out.
	Name string
	// Netns, if set, is the full name of the network namespace to run in (`ip netns exec`).
	Netns string
	// HostMounts runs in Netns with `nsenter --net` instead, in the root mount namespace:
	// `ip netns exec` gives each process a mount namespace of its own, and kubelet and
	// containerd must see each other's mounts.
	HostMounts bool
	// Mountns, with HostMounts, is a mount namespace to enter too (the path of a bind-mounted
	// namespace file), instead of staying in the root one.
	Mountns string
	Path    string
	Args    []string
	// Env is added to the harness's own environment.
	Env []string
	Dir string
	// StopSignal is sent by Stop; default SIGTERM. StopTimeout (default 5s) bounds the wait
	// before SIGKILL.
	StopSignal  syscall.Signal
	StopTimeout time.Duration
}

// Proc is a running daemon.
type Proc struct {
	Spec ProcSpec
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
	once sync.Once
	// ended is set once the harness stops or kills the process: an exit without it is
	// the process's own (a crash).
	ended atomic.Bool
}

// spawnReq asks the spawner thread to start a command.
type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from one OS thread that never exits. PR_SET_PDEATHSIG fires when the
// *thread* that forked the child exits, not the process; the Go runtime may retire a thread
// (any goroutine that exits while locked to it, as namespace switching does), which would
// kill daemons at random. Forking from a thread that lives as long as the process ties the
// children's lives to the process's.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for req := range spawnCh {
				req.reply <- req.cmd.Start()
			}
		}()
	})
	reply := make(chan error)
	spawnCh <- spawnReq{cmd, reply}
	return <-reply
}

// Start starts a daemon as a direct child of the test process. It dies with the process
// (SIGKILL through PR_SET_PDEATHSIG), runs in its own process group so a terminal's Ctrl-C
// reaches only the harness, which stops it in order, and carries the run's marker.
func (r *Run) Start(spec ProcSpec) (*Proc, error) {
	if spec.Name == "" || spec.Path == "" {
		return nil, errors.New("harness: ProcSpec needs Name and Path")
	}
	r.mu.Lock()
	closed := r.closed
	for _, p := range r.procs {
		if p.Spec.Name == spec.Name && !p.isDone() {
			r.mu.Unlock()
			return nil, fmt.Errorf("harness: process %q already running", spec.Name)
		}
	}
	r.mu.Unlock()
	if closed {
		return nil, errors.New("harness: run is closed")
	}
	path, args := spec.Path, spec.Args
	switch {
	case spec.Netns != "" && spec.HostMounts && spec.Mountns != "":
		path, args = "nsenter", append([]string{"--net=/run/netns/" + spec.Netns, "--mount=" + spec.Mountns, "--", spec.Path}, spec.Args...)
	case spec.Netns != "" && spec.HostMounts:
		path, args = "nsenter", append([]string{"--net=/run/netns/" + spec.Netns, "--", spec.Path}, spec.Args...)
	case spec.Netns != "":
		path, args = "ip", append([]string{"netns", "exec", spec.Netns, spec.Path}, spec.Args...)
	}
	out, err := os.OpenFile(filepath.Join(r.LogDir, spec.Name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child holds its own copy
	fmt.Fprintf(out, "---- %s: %s %q\n", time.Now().Format(time.RFC3339Nano), path, args)
	cmd := exec.Command(path, args...)
	cmd.Env = append(append(os.Environ(), markerEnv+"="+r.ID), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := spawn(cmd); err != nil {
		return nil, fmt.Errorf("harness: starting %s: %w", spec.Name, err)
	}
	p := &Proc{Spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

// Pid is the daemon's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Crashed reports whether the process has exited without the harness stopping or killing it.
func (p *Proc) Crashed() bool { return p.isDone() && !p.ended.Load() }

func (p *Proc) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends the stop signal, waits up to StopTimeout, then kills. Idempotent; stopping an
// exited process is not an error.
func (p *Proc) Stop() error {
	p.ended.Store(true)
	p.once.Do(func() {
		sig, wait := p.Spec.StopSignal, p.Spec.StopTimeout
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		if wait == 0 {
			wait = 5 * time.Second
		}
		if p.isDone() {
			return
		}
		p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(wait):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return nil
}

// Kill SIGKILLs the process group and waits for it, as a crash would; for failure tests.
func (p *Proc) Kill() {
	p.ended.Store(true)
	p.once.Do(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}
