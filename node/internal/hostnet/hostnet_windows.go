package hostnet

import (
	"context"
	"fmt"
)

// New returns the Windows host. Pod endpoints on a Transparent HNS network and the move of
// the node's address to the host vNIC are a later issue; until then every method says so.
func New() Host { return windowsHost{} }

type windowsHost struct{}

func notYet(what string) error {
	return fmt.Errorf("%s: %w (Windows)", what, ErrNotImplemented)
}

func (windowsHost) CreatePodInterface(context.Context, PodInterface) (Attached, error) {
	return Attached{}, notYet("creating a pod interface")
}

func (windowsHost) CheckPodInterface(context.Context, PodInterface) error {
	return notYet("checking a pod interface")
}

func (windowsHost) DeletePodInterface(context.Context, PodRef) error {
	return notYet("deleting a pod interface")
}

func (windowsHost) SetupManagementPort(context.Context, ManagementPort) error {
	return notYet("setting up the management port")
}

func (windowsHost) SetupUplink(context.Context, Uplink) (NodeAddress, error) {
	return NodeAddress{}, notYet("setting up the uplink")
}
