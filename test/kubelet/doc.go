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
// The package works on Linux only (network namespaces); see Config and Kubelet.
package kubelet
