//go:build linux

package harness

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// startKubeRun starts a run with a control plane; the run is closed when the test ends (and
// keeps its logs if the test failed).
func startKubeRun(t *testing.T, opts KubeOptions) (*Run, *Kube) {
	t.Helper()
	Require(t, "ip", "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	start := time.Now()
	bin, err := EnsureKubeBinaries(ctx, KubeVersion, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EnsureKubeBinaries: %s", time.Since(start))
	r := NewTestRun(t)
	opts.BinDir = bin
	start = time.Now()
	k, err := r.StartKube(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartKube: ready in %s", time.Since(start))
	return r, k
}

// TestKubeControlPlane checks that the real controllers act: the scheduler binds a pod to a
// registered Node, and the controller-manager gives a Service an EndpointSlice with the
// ready pod's address. Then it checks Close leaves no process and no port behind.
func TestKubeControlPlane(t *testing.T) {
	t.Parallel()
	r, k := startKubeRun(t, KubeOptions{})
	c := k.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := metav1.Now()

	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelHostname: "node-a"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubectl built beside the control plane works with the run's kubeconfig.
	binDir, err := EnsureKubeBinaries(ctx, KubeVersion, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Exec(ctx, "", filepath.Join(binDir, "kubectl"), "--kubeconfig", k.Kubeconfig, "get", "node", "node-a", "-o", "name"); err != nil || strings.TrimSpace(out) != "node/node-a" {
		t.Errorf("kubectl get node: %q, %v", out, err)
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	// The controller-manager annotates new Nodes (TTL controller), so a status update based
	// on the object Create returned can conflict: read, modify, write, retry.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status = corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "HarnessTest",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := poll.Until(ctx, "scheduler to bind web-0", 100*time.Millisecond, func() (bool, error) {
		pod, err = c.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName != "", err
	}); err != nil {
		n, _ := c.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
		t.Fatalf("%v; pod conditions %+v; node taints %+v", err, pod.Status.Conditions, n.Spec.Taints)
	}
	if pod.Spec.NodeName != "node-a" {
		t.Fatalf("web-0 bound to %q, want node-a", pod.Spec.NodeName)
	}
	t.Logf("web-0 bound to node-a after %s", time.Since(start))

	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || !(&net.IPNet{IP: net.IPv4(10, 96, 0, 0), Mask: net.CIDRMask(16, 32)}).Contains(ip) {
		t.Errorf("service ClusterIP %q not in 10.96.0.0/16", svc.Spec.ClusterIP)
	}

	// What a kubelet reports once the pod's sandbox has its network and the container is up.
	const podIP = "10.244.1.5"
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = podIP
		pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	var got []string
	if err := poll.Until(ctx, "EndpointSlice of web with "+podIP, 100*time.Millisecond, func() (bool, error) {
		list, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=web",
		})
		if err != nil {
			return false, err
		}
		got = nil
		for _, s := range list.Items {
			got = append(got, describeSlice(s))
		}
		return slicesContain(list.Items, podIP, 8080, "node-a"), nil
	}); err != nil {
		t.Fatalf("%v; slices: %v", err, got)
	}
	t.Logf("EndpointSlice with %s after %s", podIP, time.Since(start))

	// Close must leave no process of the run and free every port.
	k.mu.Lock()
	var pids []int
	for _, p := range k.procs {
		pids = append(pids, p.Pid())
	}
	k.mu.Unlock()
	ports := []int{k.apiPort, k.etcdPorts[0], k.etcdPorts[1]}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Close (kill 0: %v)", pid, err)
		}
	}
	if otherRootAlive(r.ID) {
		t.Errorf("a process with run %s's marker is alive after Close", r.ID)
	}
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("port %d not free after Close: %v", port, err)
			continue
		}
		ln.Close()
	}
}

func slicesContain(items []discoveryv1.EndpointSlice, ip string, port int32, node string) bool {
	for _, s := range items {
		if !slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool { return p.Port != nil && *p.Port == port }) {
			continue
		}
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready != nil && *e.Conditions.Ready
			onNode := e.NodeName != nil && *e.NodeName == node
			if ready && onNode && slices.Contains(e.Addresses, ip) {
				return true
			}
		}
	}
	return false
}

func describeSlice(s discoveryv1.EndpointSlice) string {
	var b strings.Builder
	b.WriteString(s.Name + "{")
	for _, e := range s.Endpoints {
		b.WriteString(strings.Join(e.Addresses, ",") + " ")
	}
	return b.String() + "}"
}

// TestExposeInNetns checks that a process inside a node's network namespace reaches the API
// server through the kubeconfig ExposeInNetns writes, with TLS verified, and that it could
// not before.
func TestExposeInNetns(t *testing.T) {
	t.Parallel()
	Require(t, "curl")
	r, k := startKubeRun(t, KubeOptions{APIServerOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := r.AddNetns("node")
	if err != nil {
		t.Fatal(err)
	}
	curl := func(url, caFile, token string) (string, error) {
		return Exec(ctx, ns, "curl", "-sS", "--fail", "--max-time", "10", "--cacert", caFile,
			"-H", "Authorization: Bearer "+token, url)
	}
	if out, err := curl(k.Host+"/readyz", k.CAFile, k.Token); err == nil {
		t.Fatalf("API server reachable from %s before ExposeInNetns: %q", ns, out)
	}

	path, err := k.ExposeInNetns(ns)
	if err != nil {
		t.Fatal(err)
	}
	// Use only what the kubeconfig says, as a node's process would.
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	cluster, user := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, cluster.CertificateAuthorityData, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := curl(cluster.Server+"/readyz", caFile, user.Token)
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("/readyz from %s via %s: %v %q", ns, cluster.Server, err, out)
	}
	// A watch holds its connection open until the server ends it: the forwarder must carry
	// the stream both ways and pass the close on. resourceVersion=0 starts from the watch
	// cache: without one, the API server waits for its cache to reach etcd's current
	// revision, which on a quiet resource takes etcd progress notifications that Debian's
	// etcd 3.4.23 does not support (the API server logs "RequestWatchProgress feature is not
	// supported"), and answers 504 after 3s.
	out, err = curl(cluster.Server+"/api/v1/namespaces?watch=1&resourceVersion=0&timeoutSeconds=1", caFile, user.Token)
	if err != nil || !strings.Contains(out, `"type":"ADDED"`) || !strings.Contains(out, `"name":"default"`) {
		t.Fatalf("watch from %s: %v %q", ns, err, out)
	}
	if again, err := k.ExposeInNetns(ns); err != nil || again != path {
		t.Errorf("second ExposeInNetns = %q, %v; want %q", again, err, path)
	}

	// An API server restart (same port) is invisible to the namespace's kubeconfig.
	if err := k.StopComponent(KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	if out, err := curl(cluster.Server+"/readyz", caFile, user.Token); err == nil {
		t.Fatalf("/readyz answered with the API server stopped: %q", out)
	}
	start := time.Now()
	if err := k.StartComponent(ctx, KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted in %s", time.Since(start))
	if out, err := curl(cluster.Server+"/readyz", caFile, user.Token); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("/readyz from %s after the restart: %v %q", ns, err, out)
	}
}

// TestEnsureKubeBinariesCached checks the fast path (a stamped bin directory is returned
// without building) and that a caller waits for the lock another builder holds.
func TestEnsureKubeBinariesCached(t *testing.T) {
	root := t.TempDir()
	t.Setenv("OVNT_CACHE_DIR", root)
	const version = "v1.99.0"
	bin := filepath.Join(root, "kube", version, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range kubeCommands {
		if err := os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Without the stamp the directory is an unfinished build: a caller must take the lock.
	// Hold the lock as a concurrent builder would and check the caller waits on it.
	unlock, err := lockFile(context.Background(), filepath.Join(root, "kube", version+".lock"), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var waited bool
	_, err = EnsureKubeBinaries(ctx, version, func(f string, a ...any) {
		waited = waited || strings.Contains(f, "waiting for another process")
	})
	if !errors.Is(err, context.DeadlineExceeded) || !waited {
		t.Fatalf("EnsureKubeBinaries with the lock held elsewhere: err %v, waited %v", err, waited)
	}
	// The builder finishes: the stamp appears and the lock is released.
	stamp := "k8s.io/kubernetes " + version + "\n"
	if err := os.WriteFile(filepath.Join(bin, stampName), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock()
	got, err := EnsureKubeBinaries(context.Background(), version, t.Logf)
	if err != nil || got != bin {
		t.Fatalf("EnsureKubeBinaries = %q, %v; want %q", got, err, bin)
	}
	if _, err := EnsureKubeBinaries(context.Background(), "1.34", t.Logf); err == nil {
		t.Error("a malformed version was accepted")
	}
}

func TestStagingModules(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
	github.com/other/mod => github.com/fork/mod v1.0.0
)

replace k8s.io/client-go => ./staging/src/k8s.io/client-go
`)
	got := stagingModules(gomod)
	want := []string{"k8s.io/api", "k8s.io/kube-scheduler", "k8s.io/client-go"}
	if !slices.Equal(got, want) {
		t.Errorf("stagingModules = %v, want %v", got, want)
	}
}

func TestKubeBuildEnv(t *testing.T) {
	env := kubeBuildEnv([]string{"HOME=/root", "GOFLAGS=-buildvcs=false -mod=vendor", "GOOS=windows", "GOWORK=/x/go.work"})
	want := map[string]string{"HOME": "/root", "GOFLAGS": "-buildvcs=false -mod=mod", "GOWORK": "off", "CGO_ENABLED": "0"}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if got["GOOS"] == "windows" {
		t.Error("GOOS=windows kept: the binaries would not run here")
	}
}

// TestEnsureKubeTestImage builds the upstream conntrack test's server into an empty cache
// (seconds with the Go module and build caches warm), checks it is that program, and that a
// second call finds it without building.
func TestEnsureKubeTestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds from the Go module proxy")
	}
	t.Setenv("OVNT_CACHE_DIR", t.TempDir())
	ctx := t.Context()
	bin, err := EnsureKubeTestImage(ctx, KubeVersion, RegressionIssue74839, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	// Without POD_IP the server has no address to watch and says so.
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "No valid IP found") {
		t.Fatalf("%s without POD_IP: %v, %q; want it to stop with \"No valid IP found\"", bin, err, out)
	}
	built := false
	again, err := EnsureKubeTestImage(ctx, KubeVersion, RegressionIssue74839, func(f string, a ...any) {
		built = built || strings.Contains(f, "making")
	})
	if err != nil || again != bin || built {
		t.Fatalf("second call: %q, %v, built again %v; want %q from the cache", again, err, built, bin)
	}
	if _, err := EnsureKubeTestImage(ctx, "1.34", RegressionIssue74839, t.Logf); err == nil {
		t.Error("a malformed version was accepted")
	}
}
