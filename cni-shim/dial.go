package cnishim

import (
	"context"
	"net"
)

// dial connects to the agent's unix socket. It is the same on Windows, which has had AF_UNIX
// since build 17063 and where Go dials it as on Linux (a named pipe would need go-winio for
// the same result); only root (an administrator) can connect.
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
