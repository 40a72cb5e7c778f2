package winsvc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
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

// Execute is the service's main loop, on the goroutine svc.Run gives it; serve does the
// work, this only translates requests and states.
func (h *handler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	const accepts = svc.AcceptStop | svc.AcceptShutdown
	stop := make(chan struct{})
	var once sync.Once
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			select {
			case <-quit:
				return
			case c := <-req:
				switch c.Cmd {
				case svc.Interrogate:
					status <- c.CurrentStatus
				case svc.Stop, svc.Shutdown:
					once.Do(func() { close(stop) })
				}
			}
		}
	}()
	h.err = serve(h.ctx, h.fn, stop, func(s State) {
		switch s {
		case StartPending:
			status <- svc.Status{State: svc.StartPending}
		case Running:
			status <- svc.Status{State: svc.Running, Accepts: accepts}
		case StopPending:
			status <- svc.Status{State: svc.StopPending}
		}
	})
	// A failure is a service-specific exit code (1), so the manager's recovery actions
	// (restart) apply.
	if h.err != nil {
		return true, 1
	}
	return false, 0
}

// LogOutput returns where the agent logs: def, or a file in contract.LogDir when running as a
// service (def if the file cannot be opened, which the manager then swallows).
func LogOutput(def io.Writer) io.Writer {
	if isSvc, err := svc.IsWindowsService(); err != nil || !isSvc {
		return def
	}
	if err := os.MkdirAll(contract.LogDir, 0o755); err != nil {
		return def
	}
	f, err := os.OpenFile(filepath.Join(contract.LogDir, "ovnt-node.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return def
	}
	return f
}
