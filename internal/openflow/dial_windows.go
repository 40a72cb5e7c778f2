package openflow

import (
	"context"
	"net"

	"github.com/Microsoft/go-winio"
)

// dial on Windows: "unix:" paths are OVS named pipes (see pipeName), not AF_UNIX sockets.
func dial(ctx context.Context, target string) (net.Conn, error) {
	network, addr, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		return winio.DialPipeContext(ctx, pipeName(addr))
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
