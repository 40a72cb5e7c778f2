//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// state is what `serve` tells the other commands about the sandbox it runs.
type state struct {
	PID        int    `json:"pid"`
	RunID      string `json:"runID"`
	Kubeconfig string `json:"kubeconfig"`
	NBRemote   string `json:"nbRemote"`
	SBRemote   string `json:"sbRemote"`
	// What the product connects to, over TLS: the master to the NB, every ovn-controller to
	// the SB with the ovn-controller role; the certificates are in PKIDir.
	NBMasterRemote  string            `json:"nbMasterRemote"`
	SBChassisRemote string            `json:"sbChassisRemote"`
	PKIDir          string            `json:"pkiDir"`
	Kubectl         string            `json:"kubectl"`
	Netns           map[string]string `json:"netns"` // "node/<name>" and "external" -> namespace path
	Pods            map[string]string `json:"pods"`  // "<namespace>/<pod>" -> namespace path, refreshed every second
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func writeState(dir string, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir))
}

// readState returns the state of a live sandbox; errNotRunning if none runs.
func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return s, errNotRunning
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", statePath(dir), err)
	}
	if !alive(s.PID) {
		os.Remove(statePath(dir)) // its owner died without tidying up; the harness sweeps the rest
		return s, errNotRunning
	}
	return s, nil
}

var errNotRunning = errors.New("no sandbox is running (start one with `make sandbox`)")

func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
