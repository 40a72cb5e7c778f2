//go:build !windows

package install

const exeSuffix = ""
