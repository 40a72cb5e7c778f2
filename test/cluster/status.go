//go:build linux

package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

func (c *Cluster) nodeReady(ctx context.Context, name string) (bool, error) {
	node, err := c.Kube.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, errNoNode
	}
	if err != nil {
		return false, err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// WaitPodReady waits until the kubelet reports pod ns/name Ready and returns it; the test
// fails when it is not within timeout, with the pod's last phase and conditions.
func (c *Cluster) WaitPodReady(ctx context.Context, tb testing.TB, ns, name string, timeout time.Duration) *corev1.Pod {
	tb.Helper()
	var pod *corev1.Pod
	poll.Eventually(tb, ctx, "pod "+ns+"/"+name+" Ready", timeout, 200*time.Millisecond, func() (bool, error) {
		p, err := c.Kube.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s, conditions %v, containers %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
	return pod
}
