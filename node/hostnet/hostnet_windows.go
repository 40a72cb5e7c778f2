package hostnet

import (
	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hns"
)

// New returns the Windows host: pods are HNS endpoints on a Transparent network whose
// vSwitch runs the Open vSwitch extension (transparent.go), over hcn, the IP Helper API and
// the registry. It logs through log, the agent's logger: as a Windows service the agent has
// no console, and the Transparent network's set-up is the part of a Windows node most worth
// reading afterwards (winsvc.LogOutput sends the agent's log to a file).
func New(log logr.Logger) Host {
	return NewTransparent(hns.NewHCN(), hns.NewIPHelper(), hns.NewSystem(), TransparentConfig{
		StateDir: contract.StateDir, Log: log,
	})
}
