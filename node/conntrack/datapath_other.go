//go:build !linux

package conntrack

// Windows: ovs-vswitchd's control channel there is not a unix socket, and whether the
// Hyper-V extension's conntrack answers dpctl/flush-conntrack is unverified; not done yet,
// so the agent logs that stale UDP entries stay until they time out.
func newDatapath(string) (Datapath, error) { return nil, ErrNotImplemented }
