package cniserver

import (
	"golang.org/x/sys/windows"
)

// adminsOnly is a protected DACL (no inherited entries) granting full access to SYSTEM
// and the Administrators group alone; OICI: files made in the directory inherit it.
// Connecting to an AF_UNIX socket on Windows needs write access to its file, so this is
// what keeps other users from plugging interfaces into pods.
const (
	adminsOnlyDir  = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	adminsOnlyFile = "D:P(A;;FA;;;SY)(A;;FA;;;BA)"
)

func restrictDir(dir string) error { return setDACL(dir, adminsOnlyDir) }

func restrictSocket(path string) error { return setDACL(path, adminsOnlyFile) }

func setDACL(path, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}
