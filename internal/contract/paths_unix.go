//go:build !windows

package contract

// The default paths of a Linux node, where the Ansible role and the DaemonSet put things (and
// elsewhere, say a developer's Mac, where nothing is deployed but the tree builds).
const (
	// CNISocket is where ovnt-node serves CNI requests and ovnt-cni dials them: the one
	// default both binaries must share (only root can connect: the socket is 0600).
	CNISocket = "/var/run/ovn-transparent/cni.sock"
	// OVSAddress is the local Open_vSwitch database, and OVSRunDir where ovs-vswitchd makes
	// its sockets (<bridge>.mgmt among them).
	OVSAddress = "unix:/var/run/openvswitch/db.sock"
	OVSRunDir  = "/var/run/openvswitch"
	// CNIBinDir and CNIConfDir are containerd's default CNI directories.
	CNIBinDir  = "/opt/cni/bin"
	CNIConfDir = "/etc/cni/net.d"
)
