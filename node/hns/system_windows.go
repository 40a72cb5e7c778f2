package hns

// System from the registry: which services the features install, and what the firmware
// says the machine is. Reading keys needs no privilege and no PowerShell.

import (
	"context"
	"errors"
	"strings"

	"golang.org/x/sys/windows/registry"
)

// NewSystem returns the host's features as the registry shows them.
func NewSystem() System { return regSystem{} }

type regSystem struct{}

func keyExists(path string) (bool, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, path, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.Close()
	return true, nil
}

func (regSystem) Features(context.Context) (Features, error) {
	var f Features
	const services = `SYSTEM\CurrentControlSet\Services\`
	for _, c := range []struct {
		key string
		to  *bool
	}{
		{services + "vmms", &f.HyperV},                                             // the Hyper-V Virtual Machine Management service
		{services + "hns", &f.Containers},                                          // the Host Network Service, from Containers
		{services + "OVSExt", &f.OVSExtension},                                     // the Open vSwitch extension's driver (ovsext.sys)
		{`SOFTWARE\Microsoft\Virtual Machine\Guest\Parameters`, &f.VirtualMachine}, // Hyper-V integration services
	} {
		ok, err := keyExists(c.key)
		if err != nil {
			return Features{}, err
		}
		*c.to = ok
	}
	if !f.VirtualMachine {
		// Other hypervisors: the firmware names them.
		if k, err := registry.OpenKey(registry.LOCAL_MACHINE, `HARDWARE\DESCRIPTION\System\BIOS`, registry.QUERY_VALUE); err == nil {
			product, _, _ := k.GetStringValue("SystemProductName")
			vendor, _, _ := k.GetStringValue("SystemManufacturer")
			k.Close()
			s := strings.ToLower(product + " " + vendor)
			for _, v := range []string{"virtual machine", "vmware", "qemu", "kvm", "xen", "virtualbox"} {
				if strings.Contains(s, v) {
					f.VirtualMachine = true
				}
			}
		}
	}
	return f, nil
}
