//go:build !windows

package cniserver

// The file modes Listen sets are the restriction on Unix.
func restrictDir(string) error    { return nil }
func restrictSocket(string) error { return nil }
