package main

import (
	"context"
	"net"
)

// defaultSocket is ovnt-node's --cni-socket default on Linux.
const defaultSocket = "/var/run/ovn-transparent/cni.sock"

// dial connects to the agent's unix socket; only root can (the socket is 0600).
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
