package harness

import "net"

// FreeLocalAddr returns "127.0.0.1:<port>" with a port free at the time of the call, for a
// daemon of the host's namespace that must listen on a port of its own (several test
// packages run clusters on one host at once). Another process may take the port before the
// daemon does; the daemon then fails at start, loudly.
func FreeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
