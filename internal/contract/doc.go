// Package contract is everything ovnt-master and ovnt-node must agree on, spelled once:
// the names of the logical rows one side creates and the other binds to (names.go), the
// addresses derived from a node's subnet (addressing.go), the constants of the data path
// both sides program (constants.go), the cluster's address ranges both binaries are given
// and how they are checked (cluster.go), the default paths both binaries use (paths_*.go),
// and the annotations each writes for the other (annotations.go). Anything read from an
// annotation is untrusted input: every parser returns an error that names the annotation and
// what is wrong, never panics, and never returns half-valid data.
//
// A test (spelling_test.go) fails when master/, node/ or cmd/ spell one of these values
// themselves.
package contract
