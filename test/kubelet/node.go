//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	// The lease is what the node lifecycle controller watches (kubelet: 40 s, renewed every
	// quarter of it).
	leaseDuration = 40 * time.Second
	leaseRenew    = leaseDuration / 4
	// nodeHeartbeat is how often the Node's conditions are written when nothing changed; with
	// a lease, kubelet does it every 5 minutes, but a fresher heartbeat costs nothing here.
	nodeHeartbeat = time.Minute
	// kubeletVersion is what the node reports; the harness runs this Kubernetes release.
	kubeletVersion = "v1.34.4"
)

// nodeCapacity is fixed rather than measured: scheduling in tests must never depend on the
// CI machine's size. pods=110 is kubelet's default.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("8"),
	corev1.ResourceMemory:           resource.MustParse("32Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

// registerNode creates the Node, or adopts an existing one and puts our labels on it, as
// kubelet does at start. Only Start registers: if the Node is deleted while the kubelet
// runs, it stays deleted (kubelet behaves the same way until it restarts), so tests can
// remove a node from the cluster; status updates then fail and are logged.
func (k *Kubelet) registerNode(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	labels := map[string]string{
		corev1.LabelOSStable:      k.cfg.OS,
		corev1.LabelArchStable:    k.cfg.Arch,
		corev1.LabelHostname:      k.cfg.NodeName,
		"beta.kubernetes.io/os":   k.cfg.OS,
		"beta.kubernetes.io/arch": k.cfg.Arch,
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        k.cfg.NodeName,
		Labels:      labels,
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
	}}
	_, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			for key, v := range labels {
				n.Labels[key] = v
			}
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("kubelet %s: registering the node: %w", k.cfg.NodeName, err)
	}
	if err := k.syncNodeStatus(ctx); err != nil {
		return fmt.Errorf("kubelet %s: node status: %w", k.cfg.NodeName, err)
	}
	k.logf("node registered")
	return nil
}

// syncNodeStatus writes the node's status when it differs from what the kubelet would report
// (Ready changed, addresses...) or its heartbeat is older than nodeHeartbeat.
func (k *Kubelet) syncNodeStatus(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	var becameReady, becameNotReady bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		before := n.Status.DeepCopy()
		wasReady := nodeReady(before)
		setNodeStatus(&n.Status, k.cfg, k.networkError(), metav1.Now())
		if !statusChanged(before, &n.Status) && heartbeatFresh(before) {
			return nil
		}
		if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		ready := nodeReady(&n.Status)
		becameReady, becameNotReady = ready && !wasReady, !ready && wasReady
		return nil
	})
	ref := &corev1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
	switch {
	case becameReady:
		k.recorder.Eventf(ref, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", k.cfg.NodeName)
	case becameNotReady:
		k.recorder.Eventf(ref, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", k.cfg.NodeName)
	}
	return err
}

// setNodeStatus sets what the kubelet owns in a node's status; conditions others set stay.
func setNodeStatus(st *corev1.NodeStatus, cfg Config, netErr error, now metav1.Time) {
	st.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: cfg.NodeIP},
		{Type: corev1.NodeHostName, Address: cfg.NodeName},
	}
	st.Capacity = nodeCapacity.DeepCopy()
	st.Allocatable = nodeCapacity.DeepCopy()
	st.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               cfg.NodeName,
		SystemUUID:              cfg.NodeName,
		BootID:                  cfg.NodeName,
		KernelVersion:           "ovnt",
		OSImage:                 "ovn-transparent test node",
		ContainerRuntimeVersion: "ovnt-kubelet://" + kubeletVersion,
		KubeletVersion:          kubeletVersion,
		OperatingSystem:         cfg.OS,
		Architecture:            cfg.Arch,
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if netErr != nil {
		// kubelet's wording, so tests and operators read the same message as on a real node.
		ready.Status, ready.Reason = corev1.ConditionFalse, "KubeletNotReady"
		ready.Message = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady " +
			"message:Network plugin returns error: " + netErr.Error()
	}
	for _, c := range []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	} {
		setNodeCondition(st, c, now)
	}
}

func setNodeCondition(st *corev1.NodeStatus, c corev1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func nodeReady(st *corev1.NodeStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// statusChanged compares two node statuses, heartbeats aside.
func statusChanged(a, b *corev1.NodeStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, st := range []*corev1.NodeStatus{a, b} {
		for i := range st.Conditions {
			st.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
	}
	return !equality.Semantic.DeepEqual(a, b)
}

func heartbeatFresh(st *corev1.NodeStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return time.Since(c.LastHeartbeatTime.Time) < nodeHeartbeat
		}
	}
	return false
}

// checkNetwork runs the CNI STATUS and records the result; it reports whether the network
// became ready.
func (k *Kubelet) checkNetwork(ctx context.Context) (becameReady bool) {
	err := k.cni.status(ctx)
	k.mu.Lock()
	old := k.netErr
	k.netErr = err
	k.mu.Unlock()
	switch {
	case err != nil && (old == nil || old.Error() != err.Error()):
		k.logf("network not ready: %v", err)
	case err == nil && old != nil:
		k.logf("network ready")
		return true
	}
	return false
}

func (k *Kubelet) networkError() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.netErr
}

// statusLoop is the runtime status check and the node status heartbeat. When the network
// becomes ready, every pod is synced again at once instead of at its next back-off.
func (k *Kubelet) statusLoop(ctx context.Context) {
	t := time.NewTicker(k.cfg.StatusInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if k.checkNetwork(ctx) {
			k.enqueueAll()
		}
		msg := ""
		if err := k.syncNodeStatus(ctx); err != nil && ctx.Err() == nil {
			msg = err.Error()
		}
		if msg != lastErr && msg != "" {
			k.logf("node status: %s", msg)
		}
		lastErr = msg
	}
}

func (k *Kubelet) leaseLoop(ctx context.Context) {
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			k.logf("node lease: %v", err)
		}
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease. Like kubelet, it makes
// the Node the lease's owner when the Node exists, so the lease goes when the Node does.
func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(k.cfg.NodeName),
		LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
		RenewTime:            &now,
	}
	l, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: corev1.NamespaceNodeLease}, Spec: spec}
		if n, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = spec.HolderIdentity, spec.LeaseDurationSeconds, spec.RenewTime
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
