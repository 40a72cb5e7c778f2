package cniserver

import (
	"net"
	"os"

	"github.com/ovn-transparent/ovn-transparent/internal/winacl"
)

// prepareDir makes the socket's directory 0700 and gives it the private ACL, whether Listen
// made it or not: on Windows the socket's own ACL is set only after it exists, so the
// directory is what keeps others out meanwhile.
func prepareDir(dir string, _ bool) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return restrictDir(dir)
}

// bind listens on path and gives the socket the private ACL.
func bind(path string) (net.Listener, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := restrictSocket(path); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// restrictDir and restrictSocket give the socket's directory and the socket an owner
// (Administrators) and a protected DACL for SYSTEM and Administrators alone. Connecting to
// an AF_UNIX socket on Windows needs write access to its file, so this is what keeps other
// users from plugging interfaces into pods; the owner is set too, since a user who created
// the directory first would otherwise keep the right to rewrite its DACL (audit M7).
func restrictDir(dir string) error {
	return winacl.Apply(winacl.Target{Path: dir, Descriptor: winacl.Private})
}

func restrictSocket(path string) error {
	return winacl.Apply(winacl.Target{Path: path, Descriptor: winacl.PrivateFile})
}
