//go:build linux

package cluster

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-transparent/ovn-transparent/test/images"
	"github.com/ovn-transparent/ovn-transparent/test/kubelet"
)

// workloadReadyFile is where the workload says it has bound every port.
const workloadReadyFile = "/tmp/ready"

// Workload completes, for real nodes, the containers of pod whose image is images.Workload:
// the command line naming the pod and every port its containers declare (what the kubelet
// stand-in gives the workload itself), the local image only (it cannot be pulled), and a
// startup probe on the file the workload writes once its ports are bound. Call it after
// the last change to the pod's ports, right before creating it; the stand-in ignores what
// it sets.
func Workload(pod *corev1.Pod) *corev1.Pod {
	args := append(kubelet.WorkloadArgs(pod), "--ready-file", workloadReadyFile)
	first := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Image != images.Workload {
			continue
		}
		// One workload serves every port of the pod, as under the stand-in; the pod's
		// other workload containers (cyclonus declares one per port) only idle.
		c.Args = args
		if !first {
			c.Args = []string{"--name", pod.Namespace + "/" + pod.Name, "--ready-file", workloadReadyFile}
		}
		first = false
		c.ImagePullPolicy = corev1.PullNever
		// A startup probe, not a readiness probe: the container is ready once it has
		// passed, and kubelet stops running it. An exec probe every second for the life of
		// a hundred pods is a hundred runc execs a second, which starves everything else.
		c.StartupProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 120, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"test", "-f", workloadReadyFile}}}}
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = new(int64)
	}
	return pod
}
