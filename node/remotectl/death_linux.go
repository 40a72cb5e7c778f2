package remotectl

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel SIGKILL the controller when the supervisor's process dies,
// however it dies: a controller left behind would fight the next supervisor's over the chassis.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
