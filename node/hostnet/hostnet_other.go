//go:build !linux && !windows

package hostnet

import (
	"context"

	"github.com/go-logr/logr"
)

// New returns a Host that refuses everything: no node runs on this system, but the tree builds
// on a developer's Mac so that its pure packages and their tests do.
func New(logr.Logger) Host { return unsupported{} }

type unsupported struct{}

func (unsupported) CreatePodInterface(context.Context, PodInterface) (Attached, error) {
	return Attached{}, ErrUnsupported
}
func (unsupported) CheckPodInterface(context.Context, PodInterface) error { return ErrUnsupported }
func (unsupported) DeletePodInterface(context.Context, PodRef) error      { return ErrUnsupported }
func (unsupported) SetupManagementPort(context.Context, ManagementPort) error {
	return ErrUnsupported
}
func (unsupported) SetupUplink(context.Context, Uplink) (NodeAddress, error) {
	return NodeAddress{}, ErrUnsupported
}
