package agent

import (
	"errors"

	"github.com/ovn-transparent/ovn-transparent/internal/winacl"
)

// aclTargets are the paths the agent gives an owner and ACL of their own on Windows, where
// they would otherwise inherit C:\'s, which lets every local user create files in them
// (audit M7): the CNI plugin and configuration directories, which containerd runs and
// reads as SYSTEM, and the kubeconfig, which holds the agent's token. The CNI socket's
// directory gets winacl.Private from cniserver.Listen. The agent's own binary directory is
// the installer's (the Ansible role): the agent may run from anywhere.
func aclTargets(cfg Config) []winacl.Target {
	t := []winacl.Target{
		{Path: cfg.CNIBinDir, Descriptor: winacl.Program},
		{Path: cfg.CNIConfDir, Descriptor: winacl.Program},
	}
	if cfg.Kubeconfig != "" {
		t = append(t, winacl.Target{Path: cfg.Kubeconfig, Descriptor: winacl.PrivateFile})
	}
	return t
}

// restrictPaths applies aclTargets (nothing outside Windows).
func restrictPaths(cfg Config) error {
	var errs []error
	for _, t := range aclTargets(cfg) {
		errs = append(errs, winacl.Apply(t))
	}
	return errors.Join(errs...)
}
