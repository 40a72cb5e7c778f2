package cniserver

import (
	"github.com/ovn-transparent/ovn-transparent/internal/winacl"
)

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
