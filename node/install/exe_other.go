//go:build !windows

package install

const exeSuffix = ""

// imageLocked: a running executable's file can be replaced by a rename here.
const imageLocked = false
