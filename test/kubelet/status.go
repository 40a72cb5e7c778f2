//go:build linux

package kubelet

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runningStatus is the status kubelet reports for pod once its sandbox is up and its
// containers run: phase Running, the sandbox's IPs, and every condition the EndpointSlice
// controller and tests look at True. There are no readiness probes: a workload that has bound
// its ports is ready. Conditions keep their transition time while their status holds, and
// conditions others own (PodScheduled from the scheduler, DisruptionTarget...) stay, so
// calling it again on its own result changes nothing.
func runningStatus(pod *corev1.Pod, hostIP string, sb *sandbox, now metav1.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.Phase = corev1.PodRunning
	st.HostIP = hostIP
	st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	st.PodIP = sb.ips[0]
	st.PodIPs = nil
	for _, ip := range sb.ips {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: sb.created.Truncate(time.Second)}
	}
	for _, t := range []corev1.PodConditionType{
		corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.ContainersReady, corev1.PodReady,
	} {
		setPodCondition(&st, t, now)
	}
	started := metav1.Time{Time: sb.started.Truncate(time.Second)}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
			ContainerID: containerURI(sb, c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", StartedAt: started, FinishedAt: started,
				ContainerID: containerURI(sb, c.Name),
			}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			RestartCount: sb.restarts,
			ContainerID:  containerURI(sb, c.Name),
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	return st
}

// containerURI is a container's "<runtime>://<id>"; every container of a pod is the pod's one
// workload process, told apart by name.
func containerURI(sb *sandbox, container string) string {
	return "ovnt://" + sb.containerID[:16] + "-" + container
}

func setPodCondition(st *corev1.PodStatus, t corev1.PodConditionType, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == t {
			if c.Status != corev1.ConditionTrue {
				c.Status, c.LastTransitionTime, c.Reason, c.Message = corev1.ConditionTrue, now, "", ""
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}
