//go:build linux

// Command kube-binaries builds (once, into the harness's cache outside the repository) the
// Kubernetes binaries the test harness runs (control plane, kubelet, kubectl, agnhost, the
// regression-issue-74839 test image), CoreDNS and the Debian root filesystem of the agnhost image, and prints the directory that holds the Kubernetes ones. `make` calls it before
// the tests so that no test package spends its timeout on a cold build.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

func main() {
	version := flag.String("version", harness.KubeVersion, "Kubernetes release to build (v1.X.Y)")
	e2e := flag.Bool("e2e", false, "also build the release's upstream e2e suite (e2e.test) and ginkgo (make e2e-binaries)")
	flag.Parse()
	log.SetFlags(log.Ltime)
	log.SetPrefix("kube-binaries: ")
	dir, err := run(*version)
	if err != nil {
		log.Fatal(err)
	}
	if *e2e {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if _, err := harness.EnsureE2EBinaries(ctx, *version, func(format string, args ...any) { log.Printf(format, args...) }); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(dir)
}

func run(version string) (string, error) {
	// Ctrl-C cancels the go commands; the build leaves nothing half-written behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { log.Printf(format, args...) }
	dir, err := harness.EnsureKubeBinaries(ctx, version, logf)
	if err != nil {
		return "", err
	}
	if _, err := harness.EnsureCoreDNS(ctx, logf); err != nil {
		return "", err
	}
	if _, err := harness.EnsureAgnhostRootfs(ctx, logf); err != nil {
		return "", err
	}
	if _, err := harness.EnsureKubeTestImage(ctx, version, harness.RegressionIssue74839, logf); err != nil {
		return "", err
	}
	return dir, nil
}
