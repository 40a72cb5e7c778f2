//go:build !linux

package ovsdb

import "syscall"

// childProcAttr: only Linux can tie a child's life to its parent's; elsewhere t.Cleanup
// alone stops the servers.
func childProcAttr() *syscall.SysProcAttr {
	return nil
}
