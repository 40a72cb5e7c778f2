package conformance

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	tprobe "github.com/ovn-transparent/ovn-transparent/test/probe"
)

// Probe timing. A blocked probe costs its whole timeout, so the first pass is short; a probe
// that disagrees with the oracle is made again with the long timeout after a pause, so that a
// slow first packet (an OpenFlow upcall, ARP) or a data plane still catching up is not a
// failure. Only a probe that disagrees twice counts.
const (
	probeTimeout = time.Second
	retryTimeout = 3 * time.Second
	retryPause   = time.Second
	// probeWorkers is how many probes run at once. Each holds an OS thread in a pod's
	// network namespace.
	probeWorkers = 96
)

// runner drives one cluster through cyclonus' cases.
type runner struct {
	cl     *cluster.Cluster
	client kubernetes.Interface
	logf   func(string, ...any)

	base     *probe.Resources // state every case starts from
	res      *probe.Resources // the oracle's picture of the cluster now
	policies []*networkingv1.NetworkPolicy
	created  int // pods created so far, to spread new ones over the nodes

	netnsMu sync.Mutex
	netns   map[string]string // "<ns>/<pod>" -> its network namespace's path, until the pod goes
}

func newRunner(cl *cluster.Cluster, logf func(string, ...any)) *runner {
	return &runner{cl: cl, client: cl.Kube.Client(), logf: logf, netns: map[string]string{}}
}

// nodeFor spreads pods over the nodes in creation order: x/a on node1, x/b on node2, ...
func (r *runner) nodeFor() string {
	n := r.cl.Nodes[r.created%len(r.cl.Nodes)].Name
	r.created++
	return n
}

// kubePod is cyclonus' pod with our workload: the same containers, ports and port names
// (what named ports resolve against), pinned to a node.
func kubePod(p *probe.Pod, node string) *corev1.Pod {
	kp := p.KubePod()
	kp.Spec.NodeName = node
	for i := range kp.Spec.Containers {
		c := &kp.Spec.Containers[i]
		c.Image, c.Command, c.Env, c.ImagePullPolicy = "ovnt-workload", nil, nil, ""
	}
	return kp
}

// setup creates cyclonus' namespaces and pods and waits until every pod is Ready.
func (r *runner) setup(ctx context.Context) error {
	res := &probe.Resources{Namespaces: map[string]map[string]string{}}
	for _, ns := range namespaces {
		res.Namespaces[ns] = map[string]string{"ns": ns}
		for _, name := range podNames {
			res.Pods = append(res.Pods, probe.NewDefaultPod(ns, name, ports, protocols, false, ""))
		}
	}
	r.res = res
	for _, ns := range namespaces {
		if err := r.createNamespace(ctx, ns, res.Namespaces[ns]); err != nil {
			return err
		}
	}
	for _, p := range res.Pods {
		if err := r.createPod(ctx, p); err != nil {
			return err
		}
	}
	r.base = r.snapshot()
	return nil
}

// snapshot copies the current model (pods are copied: their IPs change when recreated).
func (r *runner) snapshot() *probe.Resources {
	s := &probe.Resources{Namespaces: map[string]map[string]string{}}
	for ns, l := range r.res.Namespaces {
		s.Namespaces[ns] = maps.Clone(l)
	}
	for _, p := range r.res.Pods {
		c := *p
		c.Labels = maps.Clone(p.Labels)
		s.Pods = append(s.Pods, &c)
	}
	return s
}

func (r *runner) createNamespace(ctx context.Context, ns string, labels map[string]string) error {
	got, err := r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	// The API server adds kubernetes.io/metadata.name: the oracle sees the labels as stored.
	r.res.Namespaces[ns] = got.Labels
	return nil
}

// createPod creates the model's pod p, waits until it is Ready and records its address in p.
func (r *runner) createPod(ctx context.Context, p *probe.Pod) error {
	r.forgetNetns(p.Namespace, p.Name)
	if _, err := r.client.CoreV1().Pods(p.Namespace).Create(ctx, cluster.Workload(kubePod(p, r.nodeFor())), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll.Until(wctx, "pod "+p.Namespace+"/"+p.Name+" Ready", 50*time.Millisecond, func() (bool, error) {
		kp, err := r.client.CoreV1().Pods(p.Namespace).Get(wctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range kp.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && kp.Status.PodIP != "" {
				p.IP = kp.Status.PodIP
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s", kp.Status.Phase)
	})
}

func (r *runner) deletePod(ctx context.Context, ns, name string) error {
	r.forgetNetns(ns, name)
	zero := int64(0)
	err := r.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll.Until(wctx, "pod "+ns+"/"+name+" gone", 50*time.Millisecond, func() (bool, error) {
		_, err := r.client.CoreV1().Pods(ns).Get(wctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (r *runner) deleteNamespace(ctx context.Context, ns string) error {
	r.forgetNetns(ns, "")
	err := r.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll.Until(wctx, "namespace "+ns+" gone", 100*time.Millisecond, func() (bool, error) {
		_, err := r.client.CoreV1().Namespaces().Get(wctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (r *runner) setPodLabels(ctx context.Context, ns, name string, labels map[string]string) error {
	kp, err := r.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	kp.Labels = labels
	_, err = r.client.CoreV1().Pods(ns).Update(ctx, kp, metav1.UpdateOptions{})
	return err
}

func (r *runner) setNamespaceLabels(ctx context.Context, ns string, labels map[string]string) (map[string]string, error) {
	kn, err := r.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	kn.Labels = labels
	got, err := r.client.CoreV1().Namespaces().Update(ctx, kn, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return got.Labels, nil
}

// apply performs one of cyclonus' actions on the API server and on the model.
func (r *runner) apply(ctx context.Context, a *generator.Action) error {
	nps := func(ns string) interface {
		Create(context.Context, *networkingv1.NetworkPolicy, metav1.CreateOptions) (*networkingv1.NetworkPolicy, error)
		Update(context.Context, *networkingv1.NetworkPolicy, metav1.UpdateOptions) (*networkingv1.NetworkPolicy, error)
		Get(context.Context, string, metav1.GetOptions) (*networkingv1.NetworkPolicy, error)
		Delete(context.Context, string, metav1.DeleteOptions) error
	} {
		return r.client.NetworkingV1().NetworkPolicies(ns)
	}
	switch {
	case a.CreatePolicy != nil:
		p := a.CreatePolicy.Policy
		got, err := nps(p.Namespace).Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating policy %s/%s: %w", p.Namespace, p.Name, err)
		}
		r.policies = append(r.policies, got)
	case a.UpdatePolicy != nil:
		p := a.UpdatePolicy.Policy
		cur, err := nps(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		upd := p.DeepCopy()
		upd.ResourceVersion = cur.ResourceVersion
		got, err := nps(p.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating policy %s/%s: %w", p.Namespace, p.Name, err)
		}
		r.policies = slices.DeleteFunc(r.policies, func(q *networkingv1.NetworkPolicy) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
		r.policies = append(r.policies, got)
	case a.DeletePolicy != nil:
		d := a.DeletePolicy
		if err := nps(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting policy %s/%s: %w", d.Namespace, d.Name, err)
		}
		r.policies = slices.DeleteFunc(r.policies, func(q *networkingv1.NetworkPolicy) bool { return q.Namespace == d.Namespace && q.Name == d.Name })
	case a.CreateNamespace != nil:
		c := a.CreateNamespace
		res, err := r.res.CreateNamespace(c.Namespace, c.Labels)
		if err != nil {
			return err
		}
		r.res = res
		return r.createNamespace(ctx, c.Namespace, c.Labels)
	case a.SetNamespaceLabels != nil:
		s := a.SetNamespaceLabels
		stored, err := r.setNamespaceLabels(ctx, s.Namespace, s.Labels)
		if err != nil {
			return err
		}
		res, err := r.res.UpdateNamespaceLabels(s.Namespace, stored)
		if err != nil {
			return err
		}
		r.res = res
	case a.DeleteNamespace != nil:
		res, err := r.res.DeleteNamespace(a.DeleteNamespace.Namespace)
		if err != nil {
			return err
		}
		r.res = res
		r.policies = slices.DeleteFunc(r.policies, func(q *networkingv1.NetworkPolicy) bool { return q.Namespace == a.DeleteNamespace.Namespace })
		return r.deleteNamespace(ctx, a.DeleteNamespace.Namespace)
	case a.CreatePod != nil:
		c := a.CreatePod
		res, err := r.res.CreatePod(c.Namespace, c.Pod, c.Labels)
		if err != nil {
			return err
		}
		r.res = res
		p, err := res.GetPod(c.Namespace, c.Pod)
		if err != nil {
			return err
		}
		return r.createPod(ctx, p)
	case a.SetPodLabels != nil:
		s := a.SetPodLabels
		res, err := r.res.SetPodLabels(s.Namespace, s.Pod, s.Labels)
		if err != nil {
			return err
		}
		r.res = res
		return r.setPodLabels(ctx, s.Namespace, s.Pod, s.Labels)
	case a.DeletePod != nil:
		res, err := r.res.DeletePod(a.DeletePod.Namespace, a.DeletePod.Pod)
		if err != nil {
			return err
		}
		r.res = res
		return r.deletePod(ctx, a.DeletePod.Namespace, a.DeletePod.Pod)
	case a.ReadNetworkPolicies != nil:
		for _, ns := range a.ReadNetworkPolicies.Namespaces {
			l, err := r.client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range l.Items {
				r.policies = append(r.policies, &l.Items[i])
			}
		}
	default:
		return errors.New("empty action")
	}
	return nil
}

// reset brings the cluster back to the base state: no policies, the base namespaces and pods
// with their base labels, nothing else.
func (r *runner) reset(ctx context.Context) error {
	for ns := range r.res.Namespaces {
		if err := r.client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the policies of %s: %w", ns, err)
		}
	}
	r.policies = nil
	for ns := range r.res.Namespaces {
		if _, ok := r.base.Namespaces[ns]; !ok {
			if err := r.deleteNamespace(ctx, ns); err != nil {
				return err
			}
		}
	}
	for _, p := range r.res.Pods {
		if _, err := r.base.GetPod(p.Namespace, p.Name); err != nil {
			if _, isBaseNS := r.base.Namespaces[p.Namespace]; isBaseNS {
				if err := r.deletePod(ctx, p.Namespace, p.Name); err != nil {
					return err
				}
			}
		}
	}
	next := &probe.Resources{Namespaces: map[string]map[string]string{}}
	for ns, want := range r.base.Namespaces {
		kn, err := r.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !maps.Equal(kn.Labels, want) {
			if _, err := r.setNamespaceLabels(ctx, ns, want); err != nil {
				return err
			}
		}
		next.Namespaces[ns] = maps.Clone(want)
	}
	r.res = next
	for _, bp := range r.base.Pods {
		p := *bp
		p.Labels = maps.Clone(bp.Labels)
		kp, err := r.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if err := r.createPod(ctx, &p); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if !maps.Equal(kp.Labels, p.Labels) {
				if err := r.setPodLabels(ctx, p.Namespace, p.Name, p.Labels); err != nil {
					return err
				}
			}
			p.IP = kp.Status.PodIP
		}
		r.res.Pods = append(r.res.Pods, &p)
	}
	return nil
}

// nbFingerprint summarises the NB rows NetworkPolicy enforcement lives in.
func (r *runner) nbFingerprint(ctx context.Context) (string, error) {
	h := sha256.New()
	for _, q := range [][]string{
		{"--columns=match,action,priority,direction,options", "list", "ACL"},
		{"--columns=name,ports,acls", "list", "Port_Group"},
		{"--columns=name,addresses", "list", "Address_Set"},
	} {
		out, err := r.cl.Central.NBCtl(ctx, append([]string{"--format=csv", "--data=bare", "--no-headings"}, q...)...)
		if err != nil {
			return "", err
		}
		lines := strings.Split(out, "\n")
		slices.Sort(lines)
		h.Write([]byte(strings.Join(lines, "\n")))
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// settle waits until the NB rows stop changing (the master has caught up with the API
// server), then until every chassis has applied them (ovn-nbctl --wait=hv).
func (r *runner) settle(ctx context.Context) error {
	const quiet = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	prev, since := "", time.Now()
	for {
		fp, err := r.nbFingerprint(ctx)
		if err != nil {
			return err
		}
		if fp != prev {
			prev, since = fp, time.Now()
		} else if time.Since(since) >= quiet {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("NB did not settle: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, err := r.cl.Central.NBCtl(ctx, "--wait=hv", "sync")
	return err
}

// flushConntrack forgets every connection on every node. The SCTP probes need it: OVS 3.1's
// userspace conntrack keys SCTP on addresses only, so once a connection A->B is committed, any
// SCTP packet between A and B, either way and to any port, is "established" and passes the
// allow-related ACLs' est/rel flows.
func (r *runner) flushConntrack(ctx context.Context) error {
	for _, n := range r.cl.Nodes {
		if _, err := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/flush-conntrack"); err != nil {
			return err
		}
	}
	return nil
}

// podNetns is the path of the pod's network namespace on the node that runs it; looked up
// once per pod (every probe asks), forgotten when the runner deletes the pod.
func (r *runner) podNetns(ctx context.Context, ns, name string) (string, error) {
	r.netnsMu.Lock()
	defer r.netnsMu.Unlock()
	if path, ok := r.netns[ns+"/"+name]; ok {
		return path, nil
	}
	pod, err := r.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	n := r.cl.Node(pod.Spec.NodeName)
	if n == nil {
		return "", fmt.Errorf("pod %s/%s is on unknown node %q", ns, name, pod.Spec.NodeName)
	}
	path, err := n.PodNetnsPath(ctx, ns, name)
	if err != nil {
		return "", err
	}
	r.netns[ns+"/"+name] = path
	return path, nil
}

// forgetNetns drops the cached namespaces of pod ns/name, or of every pod of ns if name is
// empty.
func (r *runner) forgetNetns(ns, name string) {
	r.netnsMu.Lock()
	defer r.netnsMu.Unlock()
	for k := range r.netns {
		if k == ns+"/"+name || (name == "" && strings.HasPrefix(k, ns+"/")) {
			delete(r.netns, k)
		}
	}
}

// probeOne makes one real connection attempt. true: the destination pod answered (and it was
// the right pod); false: no answer within timeout.
func (r *runner) probeOne(ctx context.Context, j *probe.Job, timeout time.Duration) (bool, error) {
	netns, err := r.podNetns(ctx, j.FromNamespace, j.FromPod)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := netipJoin(j.ToIP, j.ResolvedPort)
	var line string
	var perr error
	if err := harness.InNetns(netns, func() error {
		switch j.Protocol {
		case corev1.ProtocolTCP:
			line, perr = tprobe.TCP(ctx, addr)
		case corev1.ProtocolUDP:
			line, perr = tprobe.UDP(ctx, addr)
		case corev1.ProtocolSCTP:
			ip, err := netip.ParseAddr(j.ToIP)
			if err != nil {
				return err
			}
			line, perr = tprobe.SCTPInit(ctx, ip, uint16(j.ResolvedPort))
		default:
			return fmt.Errorf("protocol %s", j.Protocol)
		}
		return nil
	}); err != nil {
		return false, err
	}
	if perr != nil {
		return false, nil
	}
	name, _, err := tprobe.ParseLine(line)
	if err != nil {
		return false, err
	}
	if name != j.ToKey {
		return false, fmt.Errorf("probe %s:%d: answered by %s, not %s", j.ToIP, j.ResolvedPort, name, j.ToKey)
	}
	return true, nil
}

func netipJoin(ip string, port int) string {
	return strings.Join([]string{ip, strconv.Itoa(port)}, ":")
}

// probeAll runs the jobs: TCP and UDP all at once (probeWorkers at a time), then SCTP in
// rounds in which no two probes share a pair of addresses, with conntrack flushed before
// each round (see flushConntrack).
func (r *runner) probeAll(ctx context.Context, jobs map[probeKey]*probe.Job, timeout time.Duration) (map[probeKey]bool, error) {
	got := map[probeKey]bool{}
	var mu sync.Mutex
	var firstErr error
	run := func(keys []probeKey) {
		sem := make(chan struct{}, probeWorkers)
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ok, err := r.probeOne(ctx, jobs[k], timeout)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				got[k] = ok
			}()
		}
		wg.Wait()
	}
	var streams []probeKey
	var rounds [][]probeKey
	for k, j := range jobs {
		if j.Protocol != corev1.ProtocolSCTP {
			streams = append(streams, k)
			continue
		}
		pair := [2]string{j.FromIP, j.ToIP}
		if pair[0] > pair[1] {
			pair[0], pair[1] = pair[1], pair[0]
		}
		placed := false
		for i := range rounds {
			if !slices.ContainsFunc(rounds[i], func(o probeKey) bool {
				oj := jobs[o]
				return (oj.FromIP == pair[0] && oj.ToIP == pair[1]) || (oj.FromIP == pair[1] && oj.ToIP == pair[0])
			}) {
				rounds[i] = append(rounds[i], k)
				placed = true
				break
			}
		}
		if !placed {
			rounds = append(rounds, []probeKey{k})
		}
	}
	run(streams)
	for _, round := range rounds {
		if err := r.flushConntrack(ctx); err != nil {
			return nil, err
		}
		run(round)
	}
	return got, firstErr
}

// runCase runs one case from the base state and compares every step with the oracle.
func (r *runner) runCase(ctx context.Context, idx int, tc *generator.TestCase, report func(string)) (res caseResult) {
	start := time.Now()
	res = caseResult{Index: idx, Description: tc.Description, Tags: tc.Tags.Keys(), Passed: true}
	defer func() { res.Seconds = time.Since(start).Seconds() }()
	fail := func(err error) caseResult {
		res.Passed, res.Err = false, err
		report(fmt.Sprintf("case #%d %q: %v", idx, tc.Description, err))
		return res
	}
	if err := r.reset(ctx); err != nil {
		return fail(fmt.Errorf("reset: %w", err))
	}
	if err := r.settle(ctx); err != nil {
		return fail(err)
	}
	for si, step := range tc.Steps {
		for _, a := range step.Actions {
			if err := r.apply(ctx, a); err != nil {
				return fail(fmt.Errorf("step %d: %w", si+1, err))
			}
		}
		if err := r.settle(ctx); err != nil {
			return fail(fmt.Errorf("step %d: %w", si+1, err))
		}
		e, err := expect(r.policies, r.res, step.Probe)
		if err != nil {
			return fail(fmt.Errorf("step %d: %w", si+1, err))
		}
		got, err := r.probeAll(ctx, e.Jobs, probeTimeout)
		if err != nil {
			return fail(fmt.Errorf("step %d: probing: %w", si+1, err))
		}
		retry := differing(e.Jobs, e.Want, got)
		if len(retry) > 0 {
			time.Sleep(retryPause)
			again, err := r.probeAll(ctx, retry, retryTimeout)
			if err != nil {
				return fail(fmt.Errorf("step %d: probing again: %w", si+1, err))
			}
			maps.Copy(got, again)
		}
		wrong := differing(e.Jobs, e.Want, got)
		bad := len(wrong)
		res.Retried += len(retry) - bad
		res.Probes += len(e.Want)
		res.Corrected += len(e.Corrected)
		if bad > 0 {
			explained := r.explainAll(ctx, wrong, e.Want)
			after, stale := r.afterRecompute(ctx, wrong, e.Want)
			msg := fmt.Sprintf("case #%d %q step %d: %d of %d probes differ from the oracle (%d differed on the first try)\npolicies:\n%s\nresources:\n%s\n%s%s%s",
				idx, tc.Description, si+1, bad, len(e.Want), len(retry), policiesYAML(r.policies), renderResources(r.res), renderDiff(e.Want, got),
				explained, after)
			if stale {
				// The OpenFlow tables were right and only ovs-vswitchd's cache of them was
				// not: not a failure of ours, but never silent (the summary counts it).
				res.StaleDatapath += bad
				res.Notes = append(res.Notes, "NOT COUNTED AS A FAILURE (stale datapath flows of ovs-vswitchd): "+msg)
				continue
			}
			res.Passed = false
			res.Mismatches += bad
			report(msg)
		}
	}
	return res
}

// explainedProbes is how many differing probes of one step explainAll traces.
const explainedProbes = 3

// differing returns the jobs whose result in got is not the oracle's in want.
func differing(jobs map[probeKey]*probe.Job, want, got map[probeKey]bool) map[probeKey]*probe.Job {
	out := map[probeKey]*probe.Job{}
	for k, w := range want {
		if got[k] != w {
			out[k] = jobs[k]
		}
	}
	return out
}

// explainAll explains the first few of the probes wrong (those that differ from the oracle
// in want; see explain), in a stable order.
func (r *runner) explainAll(ctx context.Context, wrong map[probeKey]*probe.Job, want map[probeKey]bool) string {
	keys := slices.Collect(maps.Keys(wrong))
	slices.SortFunc(keys, func(a, b probeKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	var b strings.Builder
	for i, k := range keys {
		if i == explainedProbes {
			fmt.Fprintf(&b, "(%d more differing probes not traced)\n", len(keys)-i)
			break
		}
		b.WriteString(r.explain(ctx, wrong[k], want[k]))
	}
	return b.String()
}

// explain is what a person needs to tell a policy defect from a data-plane one for probe j,
// whose oracle says want: OVN's own verdict on the packet (ovn-trace, new connection) and
// every connection the nodes' datapaths track between the two addresses.
func (r *runner) explain(ctx context.Context, j *probe.Job, want bool) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s -> %s %s/%d (%s:%d): oracle says allowed=%v\n", j.FromKey, j.ToKey, j.Protocol, j.ResolvedPort, j.ToIP, j.ResolvedPort, want)
	if flow, err := r.traceFlow(ctx, j); err != nil {
		fmt.Fprintf(&b, "ovn-trace: %v\n", err)
	} else {
		out, err := exec.CommandContext(ctx, "ovn-trace", "--db="+r.cl.Central.SBRemote, "--minimal", "--ct=new", "--ct=new", flow.sw, flow.match).CombinedOutput()
		fmt.Fprintf(&b, "ovn-trace %s '%s' (err %v):\n%s\n", flow.sw, flow.match, err, out)
	}
	for _, ip := range []string{j.FromIP, j.ToIP} {
		out, err := r.cl.Central.NBCtl(ctx, "--bare", "--columns=name", "find", "Address_Set", fmt.Sprintf(`addresses{>=}"%s"`, ip))
		fmt.Fprintf(&b, "address sets holding %s (err %v): %s\n", ip, err, strings.Join(strings.Fields(out), " "))
	}
	for _, n := range r.cl.Nodes {
		out, err := n.AppCtl(ctx, "ovs-vswitchd", "dpctl/dump-conntrack")
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "="+j.FromIP+",") && strings.Contains(l, "="+j.ToIP+",") {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(&b, "conntrack on %s between the two (err %v): %d entries\n%s\n", n.Name, err, len(lines), strings.Join(lines, "\n"))
	}
	from, to, err := r.probePods(ctx, j)
	if err != nil {
		fmt.Fprintf(&b, "data path: %v\n", err)
	} else {
		b.WriteString(r.explainDataPath(ctx, j, from, to))
	}
	return b.String()
}

// probePods are probe j's source and destination pods.
func (r *runner) probePods(ctx context.Context, j *probe.Job) (from, to *corev1.Pod, err error) {
	from, err = r.client.CoreV1().Pods(j.FromNamespace).Get(ctx, j.FromPod, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	to, err = r.client.CoreV1().Pods(j.ToNamespace).Get(ctx, strings.TrimPrefix(j.ToKey, j.ToNamespace+"/"), metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return from, to, nil
}

// tracedFlow is an ovn-trace microflow and the logical switch it enters.
type tracedFlow struct{ sw, match string }

// traceFlow is probe j's first packet as it enters the source pod's node switch: from the
// pod's port and MAC to the destination's MAC on the same switch, else to the node switch's
// router port.
func (r *runner) traceFlow(ctx context.Context, j *probe.Job) (tracedFlow, error) {
	from, to, err := r.probePods(ctx, j)
	if err != nil {
		return tracedFlow{}, err
	}
	src, err := netip.ParseAddr(j.FromIP)
	if err != nil {
		return tracedFlow{}, err
	}
	dst, err := netip.ParseAddr(j.ToIP)
	if err != nil {
		return tracedFlow{}, err
	}
	node := from.Spec.NodeName
	dstMAC := contract.MACFromIP(dst).String()
	if to.Spec.NodeName != node {
		out, err := r.cl.Central.NBCtl(ctx, "--bare", "--columns=mac", "find", "Logical_Router_Port", "name="+contract.NodeRouterPort(node))
		if err != nil {
			return tracedFlow{}, err
		}
		dstMAC = strings.TrimSpace(out)
	}
	l4 := map[corev1.Protocol]string{corev1.ProtocolTCP: "tcp", corev1.ProtocolUDP: "udp", corev1.ProtocolSCTP: "sctp"}[j.Protocol]
	match := fmt.Sprintf(`inport == "%s" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && %s.src == 40000 && %s.dst == %d`,
		contract.PodPort(j.FromNamespace, j.FromPod), contract.MACFromIP(src), dstMAC, src, dst, l4, l4, j.ResolvedPort)
	return tracedFlow{sw: contract.NodeSwitch(node), match: match}, nil
}

// afterRecompute tells a data path that lags its own logical flows from a policy defect: it
// makes every node's ovn-controller recompute its flows from scratch, waits for them, and
// probes the pairs of wrong (those that differed from the oracle in want) again. The verdict
// stands, except in one case: staleDatapath is true when flushing ovs-vswitchd's datapath
// flow cache alone, OpenFlow tables and conntrack untouched, made every differing probe
// agree (staleDatapathFlows says why that is not ours).
func (r *runner) afterRecompute(ctx context.Context, wrong map[probeKey]*probe.Job, want map[probeKey]bool) (dump string, staleDatapath bool) {
	var b strings.Builder
	for _, n := range r.cl.Nodes {
		if _, err := ctlController(ctx, n, "recompute"); err != nil {
			fmt.Fprintf(&b, "ovn-controller recompute on %s: %v\n", n.Name, err)
		}
	}
	if _, err := r.cl.Central.NBCtl(ctx, "--wait=hv", "sync"); err != nil {
		fmt.Fprintf(&b, "waiting for the chassis: %v\n", err)
	}
	// reprobe probes the pairs of wrong again and says, after what, how many still differ.
	reprobe := func(after string) (still int, err error) {
		res, err := r.probeAll(ctx, wrong, retryTimeout)
		for k := range wrong {
			if res[k] != want[k] {
				still++
			}
		}
		fmt.Fprintf(&b, "after %s: %d of %d differing probes still differ (err %v)\n", after, still, len(wrong), err)
		return still, err
	}
	if still, _ := reprobe("every ovn-controller recomputed its flows"); still == 0 {
		return b.String(), false
	}
	// A recompute that installs the same OpenFlow flows leaves ovs-vswitchd's datapath flow
	// cache (megaflows) as it was: flushing it makes the next packets be translated anew.
	// Then the connections tracked: a probe that agrees only after that was judged on a
	// connection conntrack should not have had.
	for _, step := range []struct{ cmd, what, diagnosis string }{
		{"dpctl/del-flows", "every node's datapath flows were flushed", staleDatapathFlows},
		{"dpctl/flush-conntrack", "every node's conntrack was flushed too", staleConnections},
	} {
		for _, n := range r.cl.Nodes {
			if _, err := n.AppCtl(ctx, "ovs-vswitchd", step.cmd); err != nil {
				fmt.Fprintf(&b, "%s on %s: %v\n", step.cmd, n.Name, err)
			}
		}
		if still, err := reprobe(step.what); still == 0 && err == nil {
			b.WriteString(step.diagnosis)
			return b.String(), step.diagnosis == staleDatapathFlows
		}
	}
	return b.String(), false
}

// What afterRecompute concludes when flushing a node-local cache made every differing probe
// agree with the oracle, the OpenFlow tables (what ovn-controller made of the ACLs)
// untouched.
const (
	staleDatapathFlows = `DIAGNOSIS: stale datapath flows in ovs-vswitchd, not a policy defect. Its datapath flow
cache (megaflows, above) kept actions that its OpenFlow tables no longer give (ofproto/trace
above, with conntrack new); flushing the cache alone (dpctl/del-flows) made every differing
probe agree with the oracle. The revalidators of Open vSwitch (3.1 in this environment,
userspace datapath) did not bring the cached flows in step with the tables after the policy
change; a recompute does not help (it installs the same tables, so nothing is revalidated). See
test/conformance/README.md, "When a probe differs".
`
	staleConnections = `DIAGNOSIS: the probes agree once conntrack is flushed: they were judged on a connection the
node's conntrack held (or had lost) that the policy's verdict should not depend on. See
test/conformance/README.md, "When a probe differs".
`
)
