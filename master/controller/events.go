package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Reasons of the Events the master records. Each one is a Warning about input the master
// cannot use; it keeps serving everything else.
const (
	ReasonSubnetExhausted   = "SubnetExhausted"    // Node: no free node subnet in the cluster CIDR
	ReasonInvalidNodeSubnet = "InvalidNodeSubnet"  // Node: subnet annotation unusable, replaced
	ReasonInvalidChassis    = "InvalidNodeChassis" // Node: node-chassis annotation unusable, no gateway
	ReasonJoinExhausted     = "JoinSubnetExhausted"
	// ReasonChassisInUse is on a Node whose chassis annotation names a chassis that carries
	// another node's gateway router: the router stays where it was.
	ReasonChassisInUse        = "NodeChassisInUse"
	ReasonUnknownNode         = "UnknownNode"       // Pod: bound to a node that does not exist
	ReasonNodeWithoutSubnet   = "NodeWithoutSubnet" // Pod: its node has no subnet
	ReasonInvalidPodNetwork   = "InvalidPodNetwork" // Pod: pod-network annotation unparsable, replaced
	ReasonPodAddressExhausted = "PodAddressExhausted"
	// ReasonReservedNamespace is on a Pod in a namespace whose pods' port names would be
	// those of infrastructure ports (contract.ReservedPodNamespace): it gets no network.
	ReasonReservedNamespace = "ReservedNamespace"
	// ReasonPodNetworkOverwritten is on a Pod whose pod-network annotation the master did
	// not write (it differs from the master's record); the master wrote its own over it.
	ReasonPodNetworkOverwritten = "PodNetworkOverwritten"
)

// Component is the source of the master's Events.
const Component = "ovnt-master"

// NewEventRecorder returns a recorder that writes Events through kube, and the function that
// stops it.
func NewEventRecorder(kube kubernetes.Interface) (record.EventRecorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}), b.Shutdown
}

// warn records a Warning Event on obj and logs it: the two places an operator looks.
func (s *caches) warn(obj runtime.Object, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	name := ""
	if m, ok := obj.(metav1.Object); ok {
		name = m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
	}
	s.log.Info("Warning: "+msg, "object", name, "reason", reason)
	s.recorder.Event(obj, corev1.EventTypeWarning, reason, msg)
}

// annotationPatch is a merge patch setting one annotation. A non-empty uid makes it apply
// only to that incarnation of the object: the API server refuses to change a UID, so a pod
// deleted and created again under the same name never gets its predecessor's address.
func annotationPatch(uid types.UID, key, value string) ([]byte, error) {
	meta := map[string]any{"annotations": map[string]string{key: value}}
	if uid != "" {
		meta["uid"] = uid
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

func (s *caches) annotateNode(ctx context.Context, name, key, value string) error {
	patch, err := annotationPatch("", key, value)
	if err != nil {
		return err
	}
	_, err = s.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (s *caches) annotatePod(ctx context.Context, pod *corev1.Pod, key, value string) error {
	patch, err := annotationPatch(pod.UID, key, value)
	if err != nil {
		return err
	}
	_, err = s.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
