package main

// On Windows the node agent reaches the OVS database over loopback TCP (the OVS service is
// configured to listen there by the Windows playbook); the CNI directories are the ones
// containerd's Windows configuration uses.
const (
	defaultOVSAddress = "tcp:127.0.0.1:6640"
	// Where the OVS for Windows service is told (OVS_RUNDIR) to make its sockets, which
	// are named pipes derived from these paths.
	defaultOVSRunDir  = `C:\ProgramData\openvswitch`
	defaultCNISocket  = `C:\ProgramData\ovn-transparent\cni.sock`
	defaultCNIBinDir  = `C:\opt\cni\bin`
	defaultCNIConfDir = `C:\etc\cni\net.d`
)
