//go:build !linux

package localnat

// Windows (and any OS but Linux): the host's own connections to its NodePorts would need a WFP or HNS policy; not
// done yet, so the agent logs that local NodePort access is unavailable.
func newNAT(Config) (NAT, error) { return nil, ErrNotImplemented }

func newRedirect(string) (Redirect, error) { return nil, ErrNotImplemented }
