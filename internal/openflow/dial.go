package openflow

import (
	"fmt"
	"strings"
)

// parseTarget splits an OVS-style connection target into a Go network and address.
func parseTarget(target string) (network, addr string, err error) {
	kind, addr, ok := strings.Cut(target, ":")
	if ok && addr != "" && (kind == "unix" || kind == "tcp") {
		return kind, addr, nil
	}
	return "", "", fmt.Errorf("openflow: target %q: want unix:PATH or tcp:HOST:PORT", target)
}

// pipeName is the named pipe OVS for Windows listens on for a "punix:PATH" socket: it has no
// AF_UNIX listener and serves the path as \\.\pipe\ followed by PATH with every '/' and '\'
// removed (lib/stream-windows.c), e.g. C:/openvswitch/var/run/openvswitch/br-int.mgmt
// becomes \\.\pipe\C:openvswitchvarrunopenvswitchbr-int.mgmt.
func pipeName(path string) string {
	return `\\.\pipe\` + strings.NewReplacer("/", "", `\`, "").Replace(path)
}
