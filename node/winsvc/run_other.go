//go:build !windows

package winsvc

import (
	"context"
	"io"
)

// Run runs fn with ctx: there is no service manager to talk to.
func Run(ctx context.Context, _ string, fn Runner) error { return fn(ctx) }

// LogOutput returns where the agent logs: def.
func LogOutput(def io.Writer) io.Writer { return def }
