package winsvc

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestServeStopsTheAgent(t *testing.T) {
	stop := make(chan struct{})
	var states []State
	agentCtxDone := false
	err := serve(context.Background(), func(ctx context.Context) error {
		close(stop) // the manager sends Stop while the agent runs
		<-ctx.Done()
		agentCtxDone = true
		return nil
	}, stop, func(s State) { states = append(states, s) })
	if err != nil || !agentCtxDone {
		t.Fatalf("serve: %v, agent context ended %v", err, agentCtxDone)
	}
	if states[0] != StartPending || states[1] != Running || states[len(states)-1] != StopPending {
		t.Errorf("states %v", states)
	}
}

func TestServeReportsAgentFailure(t *testing.T) {
	boom := errors.New("boom")
	var states []State
	err := serve(context.Background(), func(context.Context) error { return boom }, make(chan struct{}),
		func(s State) { states = append(states, s) })
	if !errors.Is(err, boom) {
		t.Fatalf("serve: %v, want the agent's error", err)
	}
	if !slices.Equal(states, []State{StartPending, Running, StopPending}) {
		t.Errorf("states %v", states)
	}
}
