package contract

// The default paths of a Windows node, where the Windows playbook and the HostProcess
// DaemonSet put things. The OVS database is reached over loopback TCP (the OVS service is
// configured to listen there by the Windows playbook); the CNI directories are the ones
// containerd's Windows configuration uses.
const (
	// CNISocket is where ovnt-node serves CNI requests and ovnt-cni dials them: an AF_UNIX
	// socket, which Windows has had since build 17063.
	CNISocket = `C:\ProgramData\ovn-transparent\cni.sock`
	// StateDir holds what the node agent keeps across restarts (the Transparent network's
	// record of the host's addresses among them).
	StateDir = `C:\ProgramData\ovn-transparent`
	// LogDir is where the node agent logs as a Windows service: the service manager gives
	// it no console.
	LogDir = `C:\ProgramData\ovn-transparent\logs`
	// OVSAddress is the local Open_vSwitch database; OVSRunDir is where the OVS for Windows
	// service is told (OVS_RUNDIR) to make its sockets, named pipes derived from these paths.
	OVSAddress = "tcp:127.0.0.1:6640"
	OVSRunDir  = `C:\ProgramData\openvswitch`
	CNIBinDir  = `C:\opt\cni\bin`
	CNIConfDir = `C:\etc\cni\net.d`
)
