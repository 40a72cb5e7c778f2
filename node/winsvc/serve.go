package winsvc

import "context"

// State is what the service reports to the service control manager.
type State int

const (
	StartPending State = iota
	Running
	StopPending
)

// serve is the service's life, OS-neutral so it is tested everywhere: it reports
// StartPending, runs fn, reports Running, and when stop is closed (the manager's Stop or
// Shutdown) or fn returns, ends fn's context, waits for fn and reports StopPending. It
// returns fn's error.
func serve(ctx context.Context, fn Runner, stop <-chan struct{}, report func(State)) error {
	report(StartPending)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	report(Running)
	var err error
	select {
	case err = <-done:
	case <-stop:
		report(StopPending)
		cancel()
		err = <-done
	}
	report(StopPending)
	return err
}
