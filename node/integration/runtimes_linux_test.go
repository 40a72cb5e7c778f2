package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// testRuntimes runs the configuration list exactly as the agent installed it, read from the
// configuration directory as runtimes read it: through the libcni of containerd 1.6 and 1.7
// (v1.1.2, which refuses any result newer than 1.0.0) and through the current one (which
// reads cniVersions and calls at 1.1.0, STATUS and GC included).
func testRuntimes(ctx context.Context, t *testing.T, e *env) {
	n1 := e.nodes[0]
	t.Run("libcni 1.1.2", func(t *testing.T) {
		p := e.newPod(ctx, t, n1, "old", 60, podOpts{})
		cacheDir := t.TempDir()
		out, version := oldRuntime(ctx, t, n1, p, cacheDir, "add")
		if version != "1.0.0" {
			t.Errorf("libcni 1.1.2 loaded the list at cniVersion %q, want 1.0.0", version)
		}
		var res struct {
			CNIVersion string `json:"cniVersion"`
			Interfaces []struct {
				Name, Mac, Sandbox string
			} `json:"interfaces"`
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("ADD result %s: %v", out, err)
		}
		if res.CNIVersion != "1.0.0" || len(res.IPs) != 1 || res.IPs[0].Address != p.ip.String() ||
			len(res.Interfaces) != 2 || res.Interfaces[1].Mac != p.mac.String() {
			t.Errorf("ADD result through libcni 1.1.2: %s", out)
		}
		checkAttachment(ctx, t, p)
		ping(ctx, t, "node1 -> the pod libcni 1.1.2 attached", n1.Netns, p.ip.Addr().String())
		oldRuntime(ctx, t, n1, p, cacheDir, "check")
		oldRuntime(ctx, t, n1, p, cacheDir, "del")
		assertGone(ctx, t, p)
	})
	t.Run("current libcni", func(t *testing.T) {
		list, err := libcni.LoadConfList(n1.confDir, cni.NetworkName)
		if err != nil {
			t.Fatal(err)
		}
		if list.CNIVersion != "1.1.0" {
			t.Errorf("the current libcni loaded the list at cniVersion %q, want 1.1.0", list.CNIVersion)
		}
		rt := &runtime{cni: libcni.NewCNIConfigWithCacheDir([]string{n1.binDir}, t.TempDir(), nil), list: list}
		if err := rt.cni.GetStatusNetworkList(ctx, list); err != nil {
			t.Errorf("STATUS: %v", err)
		}
		p := e.newPod(ctx, t, n1, "new", 61, podOpts{})
		add(ctx, t, rt, p, "1.1.0")
		if err := rt.cni.CheckNetworkList(ctx, list, p.rt()); err != nil {
			t.Errorf("CHECK: %v", err)
		}
		if err := rt.cni.GCNetworkList(ctx, list, &libcni.GCArgs{}); err != nil {
			t.Errorf("GC: %v", err)
		}
		assertGone(ctx, t, p) // no valid attachment named: GC removed it
		if err := rt.cni.DelNetworkList(ctx, list, p.rt()); err != nil {
			t.Errorf("DEL after GC: %v", err)
		}
	})
}

// oldRuntime runs one call of test/cniruntime for p against n's installed configuration and
// plugin; it returns what the call printed and the version the list was loaded at.
func oldRuntime(ctx context.Context, t *testing.T, n *node, p *pod, cacheDir, command string) ([]byte, string) {
	t.Helper()
	var args []string
	for _, kv := range p.rt().Args {
		args = append(args, kv[0]+"="+kv[1])
	}
	cmd := exec.CommandContext(ctx, oldRuntimeBin, "-conf-dir", n.confDir, "-bin-dir", n.binDir, "-cache-dir", cacheDir,
		"-netns", p.netnsPath(), "-container-id", p.containerID, "-ifname", "eth0", "-args", strings.Join(args, ";"), command)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("libcni 1.1.2 %s %s: %v\n%s", strings.ToUpper(command), p.name, err, stderr.String())
	}
	var version string
	fmt.Sscanf(stderr.String(), "cniVersion %s", &version)
	return stdout.Bytes(), version
}

// testLeakCollector: a pod deleted from the API server while its runtime never calls DEL
// (nor GC, as containerd 1.6 and 1.7 never do) loses its port and interface to the agent's
// own collector; a pod that still exists keeps them, however many passes run.
func testLeakCollector(ctx context.Context, t *testing.T, e *env) {
	n1 := e.nodes[0]
	rt := e.runtime(t, n1, "1.0.0", t.TempDir())
	gone := e.newPod(ctx, t, n1, "gone", 62, podOpts{})
	kept := e.newPod(ctx, t, n1, "kept", 63, podOpts{})
	add(ctx, t, rt, gone, "1.0.0")
	add(ctx, t, rt, kept, "1.0.0")
	if err := e.client.CoreV1().Pods("default").Delete(ctx, gone.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, ctx, "the deleted pod's port collected", 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		return portCount(ctx, t, gone) == 0, nil
	})
	assertGone(ctx, t, gone)
	time.Sleep(3 * leakCollectInterval) // passes that must leave the live pod alone
	if c := portCount(ctx, t, kept); c != 1 {
		t.Errorf("the collector took the port of a pod that exists (%d ports left)", c)
	}
	checkAttachment(ctx, t, kept)
	if err := rt.cni.DelNetworkList(ctx, rt.list, kept.rt()); err != nil {
		t.Errorf("DEL kept: %v", err)
	}
	assertGone(ctx, t, kept)
}
