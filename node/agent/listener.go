package agent

import (
	"context"
	"fmt"

	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// awaitManagerListener waits until ovsdb-server serves the manager target (the remote
// chassis' database listener, cfg.OVSDBListen) and returns its port, or, when ctx ends
// first, an error saying what to fix. ovsdb-server serves a Manager row only when its
// command line has --remote=db:Open_vSwitch,Open_vSwitch,manager_options, which the OVS
// MSI's service does not (review N1): the windows_node role adds it to the service's
// binary path, which lasts across reboots; an MSI upgrade outside the role puts the MSI's
// back, and only the agent notices (the remote ovn-controller is refused and br-int, fail
// mode secure, drops everything).
func awaitManagerListener(ctx context.Context, sw *ovs.Switch, target string) (int, error) {
	var port int
	err := sw.Wait(ctx, "ovsdb-server to serve the manager "+target, func() (bool, error) {
		p, err := sw.ManagerListening(ctx, target)
		port = p
		return err == nil, err
	})
	if err != nil {
		return 0, fmt.Errorf("%w; on Windows the ovsdb-server service's binary path needs the option (sc.exe qc ovsdb-server): "+
			"run the windows_node role again (an Open vSwitch MSI upgrade resets it), then Restart-Service ovsdb-server", err)
	}
	return port, nil
}
