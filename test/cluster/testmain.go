//go:build linux

package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// MainOptions configure RunTests.
type MainOptions struct {
	Name    string  // the test package, for messages
	Cluster Options // the cluster the package's tests share
	// Programs are what the tests need beyond the daemons every cluster runs.
	Programs []string
	// Timeout bounds the cluster's start.
	Timeout time.Duration
	// Started hands the run and the cluster to the package before its tests run.
	Started func(*harness.Run, *Cluster)
	// Failed, if set, prints what an operator would look at first when a test failed.
	Failed func()
	Logf   func(format string, args ...any)
}

// Logf prints a line to standard error after the time of day: the test packages' log of
// their shared cluster (MainOptions.Logf).
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// RunTests is a TestMain around one cluster that every test of a package shares: it is the
// integration tier (nothing under -short), fails on CI and skips elsewhere when a program is
// missing, starts the cluster, runs the tests, and tears everything down, keeping the logs
// when a test failed. It returns the exit code.
func RunTests(m *testing.M, o MainOptions) int {
	if flag.Parse(); testing.Short() {
		fmt.Fprintf(os.Stderr, "%s: integration tier, not run under -short (make test-unit)\n", o.Name)
		return 0
	}
	programs := append([]string{"ovsdb-server", "ovs-vswitchd", "ovn-controller", "ovn-northd", "etcd", "ip"}, o.Programs...)
	if missing := harness.Missing(programs...); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "%s: prerequisites missing on CI: %v\n", o.Name, missing)
			return 1
		}
		fmt.Fprintf(os.Stderr, "%s: skipping, prerequisites missing: %v (run make test as root)\n", o.Name, missing)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	run, err := harness.NewRun(harness.Options{Logf: o.Logf})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		return 1
	}
	start := time.Now()
	c, err := Start(ctx, run, o.Cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: starting the cluster: %v\n", o.Name, err)
		run.MarkFailed()
		run.Close()
		return 1
	}
	o.Logf("%s: cluster up in %s", o.Name, time.Since(start).Round(time.Millisecond))
	o.Started(run, c)
	code := m.Run()
	if code != 0 {
		if o.Failed != nil {
			o.Failed()
		}
		run.MarkFailed()
	}
	if err := run.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: teardown: %v\n", o.Name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
