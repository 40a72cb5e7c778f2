package main

import (
	"context"
	"net"
)

// defaultSocket is ovnt-node's --cni-socket default on Windows.
const defaultSocket = `C:\ProgramData\ovn-transparent\cni.sock`

// dial connects to the agent's AF_UNIX socket, which Windows has had since build 17063 and
// Go dials like on Linux; a named pipe would need go-winio for the same result.
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
