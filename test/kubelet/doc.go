// Package kubelet is the kubelet stand-in of the test environment: for one node it registers
// the Node, keeps it Ready (lease and condition heartbeat, Ready=False while the CNI plugin's
// STATUS fails), and runs every pod the scheduler binds to the node the way kubelet and
// containerd do, minus containers: a network namespace per pod, the CNI plugin the
// configuration directory names called through libcni (ADD, CHECK, DEL, GC, STATUS, with the
// arguments containerd passes), the ovnt-workload binary inside the namespace answering on the
// pod's declared ports, and the pod status (Running, Ready, pod IPs) reported to the API
// server. Deleting a pod stops its workload, calls DEL, removes the namespace and finishes
// the graceful deletion.
//
// The real kubelet and containerd run the pods of the end-to-end tests, the conformance
// suite and the sandbox (cluster.Options.RealNodes). The stand-in remains for what a real
// node cannot do: label a Linux node kubernetes.io/os=windows (the conformance suite's
// Windows variant, OVNT_CONFORMANCE_WINDOWS=1), count each CNI ADD's latency as the runtime
// sees it, and its own tests of the CNI calls a runtime makes. Tests that inject faults at
// each CNI step drive libcni directly (node/integration).
//
// The package works on Linux only (network namespaces); see Config and Kubelet.
package kubelet
