package agent

// uplinkNeedsSubnet: the Transparent network is created with the node's pod subnet as its
// static IPAM subnet, so the agent waits for the master's allocation before the uplink.
const uplinkNeedsSubnet = true
