package winacl

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// Apply sets t's owner and DACL. The DACL is protected (inherited entries are dropped), and
// for a directory its inheritable entries are propagated to what is below it. Idempotent.
func Apply(t Target) error {
	sd, err := windows.SecurityDescriptorFromString(t.Descriptor)
	if err != nil {
		return fmt.Errorf("%s: descriptor %q: %w", t.Path, t.Descriptor, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("%s: owner: %w", t.Path, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("%s: DACL: %w", t.Path, err)
	}
	err = windows.SetNamedSecurityInfo(t.Path, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("setting the owner and ACL of %s: %w", t.Path, err)
	}
	return nil
}
