//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// Config describes one node's kubelet.
type Config struct {
	NodeName string
	// Netns is the full name of the node's network namespace (harness.Node.Netns): CNI plugins
	// and hostNetwork workloads run there, as on a real node. Empty means the test's own.
	Netns string
	// NodeIP is the node's InternalIP, its pods' hostIP, and the podIP of hostNetwork pods.
	NodeIP string
	Client kubernetes.Interface
	Run    *harness.Run
	// CNIBinDirs are searched for the plugin binaries the configuration names; CNIConfDir
	// holds the configuration, read on every use as containerd reads it: the first file by
	// name ending in .conf, .conflist or .json. A missing configuration keeps the node
	// NotReady, as a network plugin that has not written its configuration yet does.
	CNIBinDirs []string
	CNIConfDir string
	// CNICacheDir is libcni's cache of attachments (what DEL and GC work from). Default: a
	// directory of the run per node name, so a later kubelet of the same node finds, and
	// garbage-collects, what an earlier one left.
	CNICacheDir string
	// WorkloadPath is the ovnt-workload binary (see BuildWorkload).
	WorkloadPath string
	// OS and Arch are the node's kubernetes.io/os and kubernetes.io/arch labels. A "windows"
	// node runs its pods as a Linux one does; the label is what the network plugin reads.
	// Defaults: linux, runtime.GOARCH.
	OS, Arch string
	// StatusInterval is how often the CNI STATUS is checked and the Ready condition
	// recomputed (kubelet: 5 s). Default: 2 s, so tests see a change quickly.
	StatusInterval time.Duration
	// Logf receives the kubelet's log lines (they also go to <LogDir>/kubelet-<node>.log).
	// Default: Run.Logf.
	Logf func(format string, args ...any)
}

// Kubelet runs one node's pods. Several kubelets (nodes) can run in one process.
type Kubelet struct {
	cfg      Config
	cni      *cniRuntime
	recorder record.EventRecorder
	events   record.EventBroadcaster
	queue    workqueue.TypedRateLimitingInterface[string]
	factory  informers.SharedInformerFactory
	pods     corelisters.PodLister
	logFile  *os.File

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by pod key namespace/name
	netErr    error               // why the network is not ready; nil when ready
	started   bool
	stopped   bool
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

const (
	workers = 4
	// Retries of a failing pod back off from 200 ms to 10 s: kubelet's own back-off (10 s to
	// 5 min) would make tests of recovery slow.
	retryBase = 200 * time.Millisecond
	retryMax  = 10 * time.Second
)

// New checks cfg and prepares a kubelet; nothing talks to the API server before Start.
func New(cfg Config) (*Kubelet, error) {
	if cfg.NodeName == "" || cfg.NodeIP == "" || cfg.Client == nil || cfg.Run == nil ||
		cfg.CNIConfDir == "" || len(cfg.CNIBinDirs) == 0 || cfg.WorkloadPath == "" {
		return nil, errors.New("kubelet: NodeName, NodeIP, Client, Run, CNIBinDirs, CNIConfDir and WorkloadPath are required")
	}
	if cfg.OS == "" {
		cfg.OS = "linux"
	}
	if cfg.Arch == "" {
		cfg.Arch = runtime.GOARCH
	}
	if cfg.StatusInterval == 0 {
		cfg.StatusInterval = 2 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = cfg.Run.Logf
	}
	if cfg.CNICacheDir == "" {
		cfg.CNICacheDir = cfg.Run.Path("kubelet", cfg.NodeName, "cni-cache")
	}
	if err := os.MkdirAll(cfg.Run.Path("kubelet", cfg.NodeName, "pods"), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(cfg.Run.LogDir, "kubelet-"+cfg.NodeName+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{cfg: cfg, sandboxes: map[string]*sandbox{}, logFile: logFile}
	k.cni = newCNIRuntime(cfg, logFile, k.validAttachments, k.logf)
	return k, nil
}

// Start registers the Node, checks the network once, and starts watching the node's pods;
// ctx bounds only this start-up, the kubelet runs until Stop. A Kubelet starts once: to
// restart a node's kubelet, Stop it and start a New one with the same Config. If Start
// fails, the kubelet is stopped.
func (k *Kubelet) Start(ctx context.Context) error {
	k.mu.Lock()
	if k.started {
		k.mu.Unlock()
		return errors.New("kubelet: already started")
	}
	k.started = true
	k.mu.Unlock()

	runCtx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	success := false
	defer func() {
		if !success {
			k.Stop() // a kubelet that failed to start leaves nothing running
		}
	}()
	// Close stops the kubelet before it stops processes and deletes namespaces, also when a
	// test forgot to, so no goroutine logs through a finished test.
	k.cfg.Run.AddCleanup("kubelet "+k.cfg.NodeName, func() error { k.Stop(); return nil })

	k.events = record.NewBroadcaster(record.WithContext(runCtx))
	k.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")})
	k.recorder = k.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: k.cfg.NodeName})

	k.checkNetwork(ctx)
	if err := k.registerNode(ctx); err != nil {
		return err
	}
	if err := k.renewLease(ctx); err != nil {
		return err
	}

	k.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax))
	k.factory = informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	podInformer := k.factory.Core().V1().Pods()
	k.pods = podInformer.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	k.factory.Start(runCtx.Done())
	for typ, ok := range k.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kubelet %s: %v informer did not sync", k.cfg.NodeName, typ)
		}
	}
	for range workers {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for k.processNext(runCtx) {
			}
		}()
	}
	k.wg.Add(2)
	go func() { defer k.wg.Done(); k.statusLoop(runCtx) }()
	go func() { defer k.wg.Done(); k.leaseLoop(runCtx) }()
	k.logf("started (node IP %s, netns %q, CNI conf %s)", k.cfg.NodeIP, k.cfg.Netns, k.cfg.CNIConfDir)
	success = true
	return nil
}

// Stop shuts the node down as a graceful node shutdown does: the kubelet stops watching,
// then every pod it runs has its workload stopped, its CNI DEL called and its namespace
// deleted. API objects stay as they are (the Node stays, and its lease expires; pods stay
// bound). Idempotent; safe to call without Start.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.stopped = true
	started := k.started
	k.mu.Unlock()
	if started {
		k.cancel()
		if k.queue != nil {
			k.queue.ShutDown()
		}
		k.wg.Wait()
		if k.factory != nil {
			k.factory.Shutdown()
		}
		k.mu.Lock()
		sandboxes := make([]*sandbox, 0, len(k.sandboxes))
		for _, sb := range k.sandboxes {
			sandboxes = append(sandboxes, sb)
		}
		k.sandboxes = map[string]*sandbox{}
		k.mu.Unlock()
		for _, sb := range sandboxes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := k.teardown(ctx, sb); err != nil {
				k.logf("shutdown: pod %s: %v", sb.key, err)
			}
			cancel()
		}
		k.events.Shutdown()
		k.logf("stopped")
	}
	k.logFile.Close()
}

// AddLatencies returns how long each successful CNI ADD of this kubelet took, in order.
func (k *Kubelet) AddLatencies() []time.Duration { return k.cni.addLatencies() }

// NodeName is the name of the node this kubelet runs.
func (k *Kubelet) NodeName() string { return k.cfg.NodeName }

// PodNetns returns the full name of the network namespace pod namespace/name runs in (the
// node's for a hostNetwork pod), for harness.InNetns and harness.Exec; false if this kubelet
// runs no such pod.
func (k *Kubelet) PodNetns(namespace, name string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	sb, ok := k.sandboxes[namespace+"/"+name]
	if !ok {
		return "", false
	}
	return sb.netns, true
}

// CheckPod runs the CNI CHECK for the pod's network, with the ADD's arguments, as a
// container runtime does to verify a running sandbox. hostNetwork pods have nothing to check.
func (k *Kubelet) CheckPod(ctx context.Context, namespace, name string) error {
	k.mu.Lock()
	sb, ok := k.sandboxes[namespace+"/"+name]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("kubelet %s: no pod %s/%s", k.cfg.NodeName, namespace, name)
	}
	if sb.rt == nil {
		return nil
	}
	return k.cni.check(ctx, sb.rt)
}

func (k *Kubelet) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(k.logFile, "%s %s\n", time.Now().Format("15:04:05.000000"), msg)
	k.cfg.Logf("kubelet %s: %s", k.cfg.NodeName, msg)
}
