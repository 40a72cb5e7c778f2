package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
	"github.com/ovn-transparent/ovn-transparent/node/pods"
)

// readiness is CNI STATUS: nil when an ADD can succeed now. It asks three things:
//   - the local OVS database is connected (ports can be added);
//   - the informers have listed pods and the Node (the API server was reached, so the
//     pod's annotation can be read);
//   - ovn-controller has set ovn-installed on the management port. That one flag proves
//     the whole chain a pod needs: the chassis settings were taken, ovn-controller reached
//     the SB, the master created this node's switch, and br-int has its flows. The OVS
//     database alone (br-int exists, external_ids set) says nothing about the SB.
func readiness(ctx context.Context, cfg Config, sw *ovs.Switch, w *pods.Watcher, nodes *nodeController) error {
	if !sw.Connected() {
		return errors.New("not connected to the local Open_vSwitch database")
	}
	if !w.Synced() || !nodes.synced() {
		return errors.New("has not listed its Node and pods from the API server yet")
	}
	name := contract.MgmtIfName(cfg.NodeName)
	iface, ok := sw.Interface(ctx, name)
	if !ok || !iface.Installed() {
		return fmt.Errorf("ovn-controller has not installed the management port %s (logical port %s) yet", name, contract.ManagementPort(cfg.NodeName))
	}
	return nil
}
