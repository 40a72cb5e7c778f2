package ovsdb

import "syscall"

// childProcAttr makes the kernel kill a test's ovsdb-server when the test binary dies
// (panic, timeout, SIGKILL), before t.Cleanup had a chance to stop it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
