// Package kubetest holds what fast controller tests need of Kubernetes without an API server:
// object builders for client-go's fake clientset, an event recorder whose Events a test can
// wait for, and one Eventually. The controllers under test run their real informers against
// the fake clientset, so a test drives them exactly as API objects would.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Node is a Node called name with the given annotations.
func Node(name string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name), Annotations: annotations}}
}

// Pod is a running pod bound to node, with labels.
func Pod(namespace, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels,
			UID: types.UID("uid-pod-" + namespace + "-" + name)},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// Namespace is a Namespace called name with labels.
func Namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Event is one Event a controller recorded.
type Event struct {
	Object  string // "namespace/name" or "name"
	Type    string
	Reason  string
	Message string
}

// Recorder is a record.EventRecorder that keeps every Event.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *Recorder) add(obj runtime.Object, typ, reason, msg string) {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Object: key, Type: typ, Reason: reason, Message: msg})
}

// Event records an Event.
func (r *Recorder) Event(obj runtime.Object, typ, reason, msg string) { r.add(obj, typ, reason, msg) }

// Eventf records an Event.
func (r *Recorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.add(obj, typ, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf records an Event; the annotations are dropped.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.add(obj, typ, reason, fmt.Sprintf(format, args...))
}

// Events returns the Events recorded for object (every Event for "").
func (r *Recorder) Events(object string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if object == "" || e.Object == object {
			out = append(out, e)
		}
	}
	return out
}

// WaitEvent waits until an Event with reason is recorded for object and returns it.
func (r *Recorder) WaitEvent(tb testing.TB, object, reason string) Event {
	tb.Helper()
	var found Event
	Eventually(tb, fmt.Sprintf("Event %s on %s", reason, object), func() (bool, string) {
		evs := r.Events(object)
		for _, e := range evs {
			if e.Reason == reason {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("events: %+v", evs)
	})
	return found
}

// Timeout bounds every Eventually: long enough for a loaded 2-core machine, short enough that
// a broken controller fails the test rather than the package's time limit.
const Timeout = 20 * time.Second

// Eventually polls cond (poll.Eventually) until it holds and fails the test after Timeout
// with what and the last state cond described.
func Eventually(tb testing.TB, what string, cond func() (bool, string)) {
	tb.Helper()
	poll.Eventually(tb, context.Background(), what, Timeout, 20*time.Millisecond, func() (bool, error) {
		ok, state := cond()
		if ok {
			return true, nil
		}
		return false, errors.New(strings.TrimSpace(state))
	})
}
