// Package remotectl runs, on one Linux host, the ovn-controllers of every remote chassis of
// the cluster (docs/remote-chassis.md): for each remote Node, a chassisrelay pair in process
// and an ovn-controller child with a run directory of its own, restarted when it exits,
// stopped when the node stops being remote.
package remotectl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// LabelRemote marks a node as a remote chassis ("true") or not ("false"), whatever its OS.
// Without it, Windows nodes are remote and every other node is not.
const LabelRemote = "ovn-transparent.io/remote-chassis"

// CAFile is the CA certificate in the certificate directory: it checks the SB's certificate
// and the node listeners'.
const CAFile = "ca.crt"

// IsRemote reports whether n is a remote chassis: labelled LabelRemote=true, or a Windows
// node not labelled LabelRemote=false.
func IsRemote(n *corev1.Node) bool {
	switch n.Labels[LabelRemote] {
	case "true":
		return true
	case "false":
		return false
	}
	return n.Labels[corev1.LabelOSStable] == "windows"
}

// Address is the node's InternalIP (the first one), where its listeners are; "" if it has
// none yet (the kubelet has not reported its status).
func Address(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return a.Address
		}
	}
	return ""
}

// Spec is what one remote chassis' controller runs with; a change of any field restarts it.
type Spec struct {
	Node    string
	Address string
	// CertFile and KeyFile are <certdir>/<node>.crt and .key: what the controller presents
	// to the SB and, through the relays, to the node's listeners. CAFile is <certdir>/ca.crt.
	CertFile, KeyFile, CAFile string
}

// ErrMissing is wrapped by Desired's error when a file the node needs is not in the
// certificate directory.
var ErrMissing = errors.New("missing")

// Desired is the controller n needs: ok false when n is not remote (no controller), an error
// when it is remote but cannot have one (no address, a certificate file missing); the error
// names what is missing.
func Desired(n *corev1.Node, certDir string) (spec Spec, ok bool, err error) {
	if !IsRemote(n) {
		return Spec{}, false, nil
	}
	spec = Spec{Node: n.Name, Address: Address(n)}
	if spec.Address == "" {
		return Spec{}, true, fmt.Errorf("node %s has no InternalIP in its status", n.Name)
	}
	spec.CertFile = filepath.Join(certDir, n.Name+".crt")
	spec.KeyFile = filepath.Join(certDir, n.Name+".key")
	spec.CAFile = filepath.Join(certDir, CAFile)
	// Renewed files need no restart: the relays read them for every connection, and
	// ovn-controller when they change (docs/remote-chassis.md, Rotation).
	for _, f := range []string{spec.CertFile, spec.KeyFile, spec.CAFile} {
		if _, err := os.Stat(f); err != nil {
			return Spec{}, true, fmt.Errorf("remote chassis %s: certificate file %s %w: %v", n.Name, f, ErrMissing, err)
		}
	}
	return spec, true, nil
}
