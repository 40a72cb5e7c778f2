// Package upstream runs the upstream Kubernetes end-to-end suite (e2e.test of
// harness.KubeVersion) against the test cluster: it holds the list of upstream tests that
// cannot apply to this cluster, with the reason for each (not-applicable.txt), and reads the
// suite's JUnit report into a result per test. The run itself is in ./suite.
package upstream
