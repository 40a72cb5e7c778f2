//go:build !windows

package winacl

// Apply does nothing outside Windows: file modes are what protect these paths there.
func Apply(Target) error { return nil }
