//go:build linux

// Command ovn-rootfs builds (once, into the harness's cache outside the repository) the root
// file system holding the pinned OVN and OVS (test/harness/ovnrootfs.go) and prints the
// directory of its launchers. `make deps` calls it when OVNT_OVN is set. Without OVNT_OVN selecting the rootfs,
// a failed build is only a warning: the tests then run the host's packages.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("ovn-rootfs: ")
	selected, err := harness.OVNSelected()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := harness.EnsureOVNRootfs(ctx, func(format string, args ...any) { log.Printf(format, args...) })
	if err != nil {
		if !selected {
			log.Printf("warning (the tests run the host's OVN; OVNT_OVN=%s would fail): %v", harness.OVNRootfsRelease, err)
			return
		}
		log.Fatal(err)
	}
	fmt.Println(o.Bin())
}
