package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
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

// testDatabaseGone: with its Open_vSwitch database gone, a node's agent says it is not ready,
// both to the runtime (STATUS) and to kubelet's probe (/readyz on its health address, the
// default 127.0.0.1:9477 in the node's namespace), and stays alive (/healthz).
func testDatabaseGone(ctx context.Context, t *testing.T, e *env) {
	n2 := e.nodes[1]
	rt := e.runtime(t, n2, "1.1.0", t.TempDir())
	if code, body := getHealth(ctx, t, n2.Netns, "/readyz"); code != 200 {
		t.Fatalf("/readyz before: %d %q", code, body)
	}
	n2.OVSDB().Kill()
	poll.Eventually(t, ctx, "node2 not ready", 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		err := rt.cni.GetStatusNetworkList(ctx, rt.list)
		code, body := getHealth(ctx, t, n2.Netns, "/readyz")
		return cniCode(err) == 50 && strings.Contains(err.Error(), "Open_vSwitch database") &&
				code == 503 && strings.Contains(body, "not connected to the local Open_vSwitch database"),
			fmt.Errorf("STATUS %v; /readyz %d %q", err, code, body)
	})
	if code, body := getHealth(ctx, t, n2.Netns, "/healthz"); code != 200 {
		t.Errorf("/healthz with the database gone: %d %q, want 200 (the agent waits for it)", code, body)
	}
	if code, _ := getHealth(ctx, t, e.nodes[0].Netns, "/readyz"); code != 200 {
		t.Errorf("node1's /readyz: %d, want 200", code)
	}
}

// getHealth GETs path from the agent's health endpoint in netns (HTTP/1.0: the server closes
// the connection after the body); status 0 when nothing answers.
func getHealth(ctx context.Context, t *testing.T, netns, path string) (int, string) {
	t.Helper()
	conn, err := dial(ctx, netns, "127.0.0.1:9477")
	if err != nil {
		return 0, err.Error()
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
