package winsvc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows/svc"
)

// Run runs fn as the service name if the service control manager started this process,
// else with ctx. As a service, fn's context ends on Stop or Shutdown (or when ctx ends); the
// manager sees StartPending until fn runs, Running, then StopPending while fn drains
// (the agent lets CNI calls in flight finish), and an exit code if fn failed.
func Run(ctx context.Context, name string, fn Runner) error {
	isSvc, err := svc.IsWindowsService()
	if err != nil {
		return fmt.Errorf("asking whether this is a service: %w", err)
	}
	if !isSvc {
		return fn(ctx)
	}
	h := &handler{ctx: ctx, fn: fn}
	if err := svc.Run(name, h); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	return h.err
}

type handler struct {
	ctx context.Context
	fn  Runner
	err error
}

// Execute is the service's main loop, on the goroutine svc.Run gives it.
func (h *handler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.fn(ctx) }()
	const accepts = svc.AcceptStop | svc.AcceptShutdown
	status <- svc.Status{State: svc.Running, Accepts: accepts}
	for {
		select {
		case err := <-done:
			return h.finish(err, status)
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				cancel()
				return h.finish(<-done, status)
			}
		}
	}
}

// finish records fn's result: a failure is a service-specific exit code (1), so the
// manager's recovery actions (restart) apply.
func (h *handler) finish(err error, status chan<- svc.Status) (bool, uint32) {
	h.err = err
	status <- svc.Status{State: svc.StopPending}
	if err != nil {
		return true, 1
	}
	return false, 0
}

// LogDir is where a service logs: the manager gives it no console.
const LogDir = `C:\ProgramData\ovn-transparent\logs`

// LogOutput returns where the agent logs: def, or a file in LogDir when running as a
// service (def if the file cannot be opened, which the manager then swallows).
func LogOutput(def io.Writer) io.Writer {
	if isSvc, err := svc.IsWindowsService(); err != nil || !isSvc {
		return def
	}
	if err := os.MkdirAll(LogDir, 0o755); err != nil {
		return def
	}
	f, err := os.OpenFile(filepath.Join(LogDir, "ovnt-node.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return def
	}
	return f
}
