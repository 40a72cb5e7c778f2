package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// testFailures: ADDs that cannot succeed fail with an error naming the pod and leave nothing
// behind.
func testFailures(ctx context.Context, t *testing.T, e *env) {
	n1 := e.nodes[0]
	rt := e.runtime(t, n1, "1.1.0", t.TempDir())

	ghost := e.newPod(ctx, t, n1, "ghost", 40, podOpts{noPod: true})
	t0 := time.Now()
	_, err := rt.cni.AddNetworkList(ctx, rt.list, ghost.rt())
	errNames(t, "pod that does not exist", err, "ghost")
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("ADD of a pod that does not exist took %v: it should not wait", d)
	}
	t.Logf("ADD of a missing pod failed in %v: %v", time.Since(t0).Round(time.Millisecond), err)
	assertGone(ctx, t, ghost)

	bare := e.newPod(ctx, t, n1, "unannotated", 41, podOpts{noAnnotation: true})
	t0 = time.Now()
	_, err = rt.cni.AddNetworkList(ctx, rt.list, bare.rt())
	errNames(t, "pod never annotated", err, "unannotated")
	if d := time.Since(t0); d < annotationTimeout || d > annotationTimeout+5*time.Second || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("ADD of a pod never annotated failed after %v (timeout %v): %v", d, annotationTimeout, err)
	}
	t.Logf("ADD of an unannotated pod failed in %v: %v", time.Since(t0).Round(time.Millisecond), err)
	assertGone(ctx, t, bare)

	// The pod is annotated but the master made no logical port: the interface and the
	// port are made, ovn-controller never installs it, and both must be rolled back.
	orphan := e.newPod(ctx, t, n1, "nolsp", 42, podOpts{noLSP: true})
	t0 = time.Now()
	_, err = rt.cni.AddNetworkList(ctx, rt.list, orphan.rt())
	errNames(t, "pod without logical port", err, "nolsp")
	t.Logf("ADD of a pod without logical port failed in %v: %v", time.Since(t0).Round(time.Millisecond), err)
	assertGone(ctx, t, orphan)
}
