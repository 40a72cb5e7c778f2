//go:build !windows

package agent

// uplinkNeedsSubnet: a Linux node's uplink does not depend on the pod subnet, and the
// chassis comes up before the agent talks to the API server.
const uplinkNeedsSubnet = false
