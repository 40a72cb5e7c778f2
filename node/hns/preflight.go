package hns

import (
	"context"
	"errors"
	"fmt"
)

// Preflight checks that the host can run a Transparent network with the OVS extension on
// adapter, and returns every failed check as an error saying what to do, joined. warnings
// are what cannot be checked from inside the node but breaks pods if wrong (MAC spoofing).
// bound says the network exists on adapter already: the vSwitch has unbound IP from the
// adapter, which IP Helper then no longer lists, so it is not looked up.
func Preflight(ctx context.Context, sys System, ip IPHelper, adapter string, bound bool) (warnings []string, err error) {
	f, err := sys.Features(ctx)
	if err != nil {
		return nil, fmt.Errorf("preflight: reading the host's features: %w", err)
	}
	var errs []error
	if !f.HyperV {
		errs = append(errs, errors.New("the Hyper-V role is not installed: run `Install-WindowsFeature Hyper-V -IncludeManagementTools` and reboot"))
	}
	if !f.Containers {
		errs = append(errs, errors.New("the Containers feature (HNS) is not installed: run `Install-WindowsFeature Containers` and reboot"))
	}
	if !f.OVSExtension {
		errs = append(errs, errors.New("the Open vSwitch Hyper-V extension is not installed: install the signed Open vSwitch MSI"))
	}
	if adapter == "" {
		errs = append(errs, errors.New("no uplink adapter configured: pass --uplink-interface with the physical adapter's name (Get-NetAdapter -Physical)"))
	} else if bound {
		// The HNS network on it is the proof it exists and is physical.
	} else if a, err := ip.Interface(ctx, adapter); errors.Is(err, ErrNotFound) {
		errs = append(errs, fmt.Errorf("adapter %q does not exist: pass --uplink-interface with a name from Get-NetAdapter -Physical", adapter))
	} else if err != nil {
		errs = append(errs, fmt.Errorf("adapter %q: %w", adapter, err))
	} else if !a.Physical {
		errs = append(errs, fmt.Errorf("adapter %q: %w: a Transparent network must be bound to a physical adapter (Get-NetAdapter -Physical); "+
			"if it is a vEthernet adapter of an existing vSwitch, name the adapter that switch is bound to", adapter, ErrVirtualAdapter))
	}
	if f.VirtualMachine {
		warnings = append(warnings, "this node is a virtual machine: pods' MAC addresses reach the network only with MAC address spoofing "+
			"allowed on its adapter (on the Hyper-V host: Set-VMNetworkAdapter -VMName <vm> -MacAddressSpoofing On)")
	}
	if err := errors.Join(errs...); err != nil {
		return warnings, fmt.Errorf("preflight: %w", err)
	}
	return warnings, nil
}
