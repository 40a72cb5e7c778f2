//go:build !windows

package openflow

import (
	"context"
	"net"
)

func dial(ctx context.Context, target string) (net.Conn, error) {
	network, addr, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
