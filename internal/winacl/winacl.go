// Package winacl gives the files and directories the Windows node agent relies on an owner
// and a DACL of their own, instead of what they inherit from C:\ (security audit M7).
//
// Windows' default ACL on the system drive lets every user (BUILTIN\Users) read and create
// files and folders below it. Inherited by the CNI directories and the agent's own, it let a
// local user drop a network configuration list and a plugin that containerd would run as
// SYSTEM, or read the agent's kubeconfig. A directory a user created before the agent keeps
// that user as its owner, and an owner may always rewrite the DACL: so the owner is set too,
// to the Administrators group.
//
// The descriptors are SDDL strings; OS-neutral, so that their content is tested on Linux.
// Apply is Windows only (acl_windows.go); elsewhere it does nothing.
package winacl

// Descriptors. Every one is protected (P: nothing inherited from the parent) and owned by
// BUILTIN\Administrators (BA); LocalSystem (SY) and Administrators have full access.
const (
	// Private is for secrets and for what only the agent may write and read: the
	// kubeconfig, the CNI socket and its directory. OICI: what is made inside inherits it.
	Private = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	// PrivateFile is Private for a file, which has nothing to pass on.
	PrivateFile = "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"
	// Program is for binaries and configuration the runtime reads: the CNI plugin and
	// configuration directories and the agent's own directory. Users may read and execute,
	// not write.
	Program = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FRFX;;;BU)"
)

// Target is one path and the descriptor it must have.
type Target struct {
	Path       string
	Descriptor string
}
