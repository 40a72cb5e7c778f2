// Package integration tests ovnt-node and ovnt-cni as a cluster runs them: the built
// binaries, a real API server, OVN central, and nodes in network namespaces with their own
// ovsdb-server, ovs-vswitchd and ovn-controller (test/harness). The test plays the container
// runtime through libcni and the master by writing annotations and NB rows itself.
package integration
