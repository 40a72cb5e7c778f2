package localnat

import (
	"context"
	"fmt"
	"net/netip"
)

// RedirectTableName is the nf_tables table (family ip) of the management address redirect.
const RedirectTableName = "ovnt-mgmt-redirect"

// Redirect delivers what OVN sends the node at its management port address as if it were
// sent to the node IP. A Service's load balancers write the node's own host-network
// endpoint as the node's management address on its switch and gateway router (a node IP
// there would come back to the host from itself, or could not be forwarded at all:
// master/services README, "Host-network endpoints"); a host-network server may listen on the
// node IP only (upstream e2e's UDP servers do), so the node turns the management address
// back into the node IP for new connections arriving through the management port. Answers
// leave from the management address again (conntrack), through the port, where OVN undoes
// its own NAT.
type Redirect interface {
	// Sync makes the node redirect exactly new connections that arrive on iface for mgmtIP
	// to nodeIP, replacing what an earlier Sync set, in one atomic step. Idempotent.
	Sync(ctx context.Context, iface string, mgmtIP, nodeIP netip.Addr) error
	// Delete removes the redirect; nothing to do if there is none.
	Delete(ctx context.Context) error
}

// NewRedirect returns the system's redirect in table (RedirectTableName if empty);
// ErrNotImplemented where there is none.
func NewRedirect(table string) (Redirect, error) {
	if table == "" {
		table = RedirectTableName
	}
	return newRedirect(table)
}

func validateRedirect(iface string, mgmtIP, nodeIP netip.Addr) error {
	if iface == "" || len(iface) >= 16 {
		return fmt.Errorf("localnat: redirect: interface name %q", iface)
	}
	if !mgmtIP.Is4() || !nodeIP.Is4() || mgmtIP == nodeIP {
		return fmt.Errorf("localnat: redirect %s -> %s: two different IPv4 addresses needed", mgmtIP, nodeIP)
	}
	return nil
}
