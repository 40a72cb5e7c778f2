//go:build linux

package harness

import (
	"context"
	"errors"
	"os"
)

// ExternalHost is a machine outside the cluster on the nodes' L2 underlay, for north-south
// tests: it holds ExternalHostIP and also UnderlayGateway, the nodes' default gateway, so
// whatever a node (or a gateway router SNATing to the node IP) sends off-subnet reaches it.
type ExternalHost struct {
	Netns     string // r.Name("ext")
	IP        string // ExternalHostIP
	GatewayIP string // UnderlayGateway
	MAC       string
}

// StartExternalHost puts the external host on the run's underlay (created on first use). A
// run has one; a second call fails.
func (r *Run) StartExternalHost(ctx context.Context) (*ExternalHost, error) {
	u, err := r.underlay(ctx)
	if err != nil {
		return nil, err
	}
	h := &ExternalHost{
		Netns: r.Name("ext"), IP: ExternalHostIP, GatewayIP: UnderlayGateway,
		MAC: "0a:58:ac:12:00:64", // 0a:58 + 172.18.0.100, like the nodes'
	}
	if _, err := os.Stat("/run/netns/" + h.Netns); err == nil {
		return nil, errors.New("harness: this run already has an external host")
	}
	if _, err := r.AddNetns("ext"); err != nil {
		return nil, err
	}
	if err := u.attach(ctx, h.Netns, "ul-ext", h.MAC, h.IP+underlayPrefix, h.GatewayIP+underlayPrefix); err != nil {
		// The veth's underlay end outlives the namespace's name; delete it first (see Node.Stop).
		Exec(context.Background(), u.netns, "ip", "link", "del", "ul-ext")
		deleteNetns(h.Netns)
		return nil, err
	}
	return h, nil
}

// Exec runs a short command in the external host's namespace and returns its combined output.
func (h *ExternalHost) Exec(ctx context.Context, name string, args ...string) (string, error) {
	return Exec(ctx, h.Netns, name, args...)
}
