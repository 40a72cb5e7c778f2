//go:build linux

package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// podIfName is the pod's interface, as containerd names it.
const podIfName = "eth0"

// workloadReadyTimeout bounds how long a started workload may take to bind its ports.
const workloadReadyTimeout = 10 * time.Second

// sandbox is what the kubelet runs for one pod: containerd's pod sandbox (a network namespace
// set up by CNI) and the pod's one process. Its workload fields are touched only by the pod's
// sync, which the queue never runs twice at once for one key, and by Stop after the workers
// ended.
type sandbox struct {
	key         string // namespace/name
	uid         types.UID
	containerID string
	netns       string              // full name; the node's for a hostNetwork pod
	rt          *libcni.RuntimeConf // nil for a hostNetwork pod: no CNI
	ips         []string
	created     time.Time
	dir         string // kubelet's directory for the pod (the workload's ready file)

	workload *harness.Proc
	started  time.Time // when the current workload became ready
	restarts int32
}

// newContainerID returns a random 64-hex ID, the form containerd gives a sandbox.
func newContainerID() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createSandbox gives pod its network: a namespace and a CNI ADD with the arguments
// containerd passes. On failure nothing is left: like containerd, it calls DEL (so the plugin
// releases whatever it set up before failing) and deletes the namespace.
func (k *Kubelet) createSandbox(ctx context.Context, pod *corev1.Pod) (*sandbox, error) {
	id := newContainerID()
	sb := &sandbox{
		key:         pod.Namespace + "/" + pod.Name,
		uid:         pod.UID,
		containerID: id,
		created:     time.Now(),
		dir:         k.cfg.Run.Path("kubelet", k.cfg.NodeName, "pods", string(pod.UID)),
	}
	if err := os.MkdirAll(sb.dir, 0o755); err != nil {
		return nil, err
	}
	if pod.Spec.HostNetwork {
		sb.netns, sb.ips = k.cfg.Netns, []string{k.cfg.NodeIP}
		return sb, nil
	}
	// "ovnt-<run>-p<12 hex>": 25 characters, unique per sandbox.
	ns, err := k.cfg.Run.AddNetns("p" + id[:12])
	if err != nil {
		deleteNetns(context.WithoutCancel(ctx), k.cfg.Run.Name("p"+id[:12]))
		return nil, fmt.Errorf("failed to create network namespace for sandbox %q: %w", id, err)
	}
	sb.netns = ns
	sb.rt = &libcni.RuntimeConf{
		ContainerID: id,
		NetNS:       "/run/netns/" + ns,
		IfName:      podIfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", id},
			{"K8S_POD_UID", string(pod.UID)},
		},
		// Passed to plugins that declare the capability, as containerd does.
		CapabilityArgs: map[string]any{"io.kubernetes.cri.pod-annotations": pod.Annotations},
	}
	success := false
	defer func() {
		if success {
			return
		}
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cniDelTimeout)
		defer cancel()
		if err := k.cni.del(cleanup, sb.rt); err != nil {
			k.logf("pod %s: DEL after failed ADD of sandbox %s: %v", sb.key, id, err)
		}
		if err := deleteNetns(cleanup, ns); err != nil {
			k.logf("pod %s: %v", sb.key, err)
		}
		os.RemoveAll(sb.dir)
	}()
	res, err := k.cni.add(ctx, sb.rt)
	if err == nil {
		sb.ips, err = podIPs(res, podIfName)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to setup network for sandbox %q: %w", id, err)
	}
	success = true
	return sb, nil
}

// teardown stops the pod's workload, calls DEL and deletes the namespace. It stops at the
// first failure, so a retry repeats what did not complete (each step is idempotent).
func (k *Kubelet) teardown(ctx context.Context, sb *sandbox) error {
	if sb.workload != nil {
		sb.workload.Stop()
	}
	if sb.rt != nil {
		if err := k.cni.del(ctx, sb.rt); err != nil {
			return fmt.Errorf("failed to destroy network for sandbox %q: %w", sb.containerID, err)
		}
		if err := deleteNetns(ctx, sb.netns); err != nil {
			return err
		}
	}
	return os.RemoveAll(sb.dir)
}

// startWorkload starts the pod's workload (again, if it exited) and waits until it has bound
// every port. A workload that exits later enqueues the pod, whose next sync restarts it, as
// restartPolicy Always would.
func (k *Kubelet) startWorkload(ctx context.Context, pod *corev1.Pod, sb *sandbox) error {
	ready := filepath.Join(sb.dir, "ready")
	os.Remove(ready)
	p, err := k.cfg.Run.Start(harness.ProcSpec{
		// Named after node and pod, so <LogDir>/workload-<node>-<ns>-<pod>.out is easy to find.
		Name:  "workload-" + k.cfg.NodeName + "-" + pod.Namespace + "-" + pod.Name,
		Netns: sb.netns,
		Path:  k.cfg.WorkloadPath,
		Args:  append(WorkloadArgs(pod), "--ready-file", ready),
	})
	if err != nil {
		return err
	}
	if sb.workload != nil {
		sb.restarts++
	}
	sb.workload = p
	go func() {
		<-p.Done()
		k.queue.Add(sb.key) // a no-op once the queue is shut down
	}()
	waitCtx, cancel := context.WithTimeout(ctx, workloadReadyTimeout)
	defer cancel()
	err = poll.Until(waitCtx, "workload of "+sb.key+" to bind its ports", 10*time.Millisecond, func() (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("workload exited: %v (log %s.out)", p.Err(), p.Spec.Name)
		default:
		}
		_, err := os.Stat(ready)
		return err == nil, nil
	})
	if err != nil {
		p.Stop()
		return err
	}
	sb.started = time.Now()
	return nil
}

// WorkloadArgs names the pod and lists every port its containers declare, once each.
func WorkloadArgs(pod *corev1.Pod) []string {
	args := []string{"--name", pod.Namespace + "/" + pod.Name}
	seen := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			flag := "--" + proto + "=" + strconv.Itoa(int(p.ContainerPort))
			if !seen[flag] {
				seen[flag] = true
				args = append(args, flag)
			}
		}
	}
	return args
}

// deleteNetns kills whatever still runs in the namespace and deletes it; an absent namespace
// is not an error.
func deleteNetns(ctx context.Context, name string) error {
	if _, err := os.Stat("/run/netns/" + name); os.IsNotExist(err) {
		return nil
	}
	if out, err := harness.Exec(ctx, "", "ip", "netns", "pids", name); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
	}
	if out, err := harness.Exec(ctx, "", "ip", "netns", "del", name); err != nil && !strings.Contains(out, "No such file") {
		return fmt.Errorf("deleting network namespace %s: %w", name, err)
	}
	return nil
}
