package agent

import (
	"context"
	"errors"

	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/node/cniserver"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// dropStalePorts removes the pod ports whose interface is gone (on Windows after a reboot,
// which HNS endpoints do not survive), and the management port mgmt if its interface is
// gone, before setupChassis enables the OVS extension again: OVS would otherwise give each
// of these internal ports a stray host vNIC, and the management endpoint's own vNIC would
// stay unbound. The management port comes back once its endpoint exists again. A port
// whose interface cannot be looked up stays; DEL or the leak collector see to it later.
func dropStalePorts(ctx context.Context, sw *ovs.Switch, v hostnet.Volatile, mgmt string, log logr.Logger) error {
	ifaces, err := sw.InterfacesWith(ctx, cniserver.KeyContainerID)
	if err != nil {
		return err
	}
	if i, ok := sw.Interface(ctx, mgmt); ok {
		ifaces = append(ifaces, i)
	}
	var errs []error
	for _, i := range ifaces {
		ok, err := v.PodInterfaceExists(ctx, i.Name)
		if err != nil || ok {
			errs = append(errs, err)
			continue
		}
		if err := sw.DeletePort(ctx, i.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("removed a pod port whose interface is gone (a reboot?)", "port", i.Name, "pod", i.ExternalIDs[cniserver.KeyPod])
	}
	return errors.Join(errs...)
}
