//go:build !linux

package remotectl

import "os/exec"

// setDeathSignal does nothing: the remote controllers run on Linux hosts.
func setDeathSignal(*exec.Cmd) {}
