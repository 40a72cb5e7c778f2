// Package conformance judges the cluster's NetworkPolicy enforcement with an independent
// oracle: the truth-table engine and case generator of github.com/mattfenwick/cyclonus
// (v0.5.6). In a real cluster (test/cluster: the real ovnt-master, ovnt-node, ovnt-cni,
// ovn-controller and OVS on two nodes) it creates cyclonus' namespaces x, y, z and pods a, b, c
// (ports 80 and 81 over TCP, UDP and SCTP, named serve-<port>-<protocol>), then for every
// generated case applies its steps to the API server, waits for the Northbound rows to settle
// and every chassis to apply them, probes every ordered pair of pods on every port and protocol
// with real packets, and compares with cyclonus' answer, corrected where cyclonus' label
// selectors disagree with Kubernetes' (notin.go).
//
// `go test` runs a subset in which every tag appears (CI); `make conformance` runs them all and
// prints pass/fail counts per tag.
package conformance
