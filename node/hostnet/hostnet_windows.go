package hostnet

import (
	"log"
	"os"

	"github.com/go-logr/logr/funcr"

	"github.com/ovn-transparent/ovn-transparent/node/hns"
)

// New returns the Windows host: pods are HNS endpoints on a Transparent network whose
// vSwitch runs the Open vSwitch extension (transparent.go), over hcn, the IP Helper API and
// the registry.
func New() Host {
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	lg := funcr.New(func(prefix, args string) { logger.Println(prefix, args) }, funcr.Options{})
	return NewTransparent(hns.NewHCN(), hns.NewIPHelper(), hns.NewSystem(), TransparentConfig{
		StateDir: `C:\ProgramData\ovn-transparent`, Log: lg.WithName("hostnet"),
	})
}
