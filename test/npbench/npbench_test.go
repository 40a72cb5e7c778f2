//go:build linux

// Package npbench measures ovnt-master's NetworkPolicy work against a real Northbound
// database and API server, without a data plane: 500 namespaces x 20 pods x 5 policies.
// It prints figures; nothing asserts a time. Run it with `make bench-netpol`.
package npbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

const (
	namespaces  = 500
	podsPerNS   = 20
	nodes       = 5
	clusterCIDR = "10.128.0.0/14"
	nodeBits    = 20
	samples     = 60
)

var apps = []string{"frontend", "backend", "db", "web"}

func nsName(i int) string { return fmt.Sprintf("bench-%03d", i) }

// nbWatch is the benchmark's own NB client: it counts row changes and remembers when the
// last one happened.
type nbWatch struct {
	c       client.Client
	changes atomic.Int64
	mu      sync.Mutex
	probe   func(table string, m model.Model) bool
	hit     chan time.Time
	last    atomic.Int64 // unix nanoseconds
}

// touch counts a change to a row of table; last follows the policy tables only (ovn-northd
// keeps writing the pod ports' up column meanwhile).
func (w *nbWatch) touch(table string) {
	w.changes.Add(1)
	if table == nbdb.ACLTable || table == nbdb.PortGroupTable || table == nbdb.AddressSetTable {
		w.last.Store(time.Now().UnixNano())
	}
}

func (w *nbWatch) OnAdd(t string, m model.Model)       { w.touch(t); w.check(t, m) }
func (w *nbWatch) OnUpdate(t string, _, m model.Model) { w.touch(t); w.check(t, m) }
func (w *nbWatch) OnDelete(t string, _ model.Model)    { w.touch(t) }

// expect arms a probe: the first row added or updated that satisfies it sends the time it
// arrived on the returned channel. Event-driven, so that measuring costs the master no CPU.
func (w *nbWatch) expect(probe func(table string, m model.Model) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.probe, w.hit = probe, ch
	w.mu.Unlock()
	return ch
}

func (w *nbWatch) check(t string, m model.Model) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.probe != nil && w.probe(t, m) {
		w.hit <- now
		w.probe = nil
	}
}

func await(ctx context.Context, b *testing.B, what string, ch <-chan time.Time) time.Time {
	select {
	case t := <-ch:
		return t
	case <-time.After(time.Minute):
		b.Fatalf("%s: not seen in a minute", what)
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
	return time.Time{}
}

func (w *nbWatch) count(ctx context.Context, m any) int {
	var n int
	if err := w.c.List(ctx, m); err == nil {
		switch s := m.(type) {
		case *[]nbdb.ACL:
			n = len(*s)
		case *[]nbdb.PortGroup:
			n = len(*s)
		case *[]nbdb.AddressSet:
			n = len(*s)
		case *[]nbdb.LogicalSwitchPort:
			n = len(*s)
		}
	}
	return n
}

// waitUntil polls cond every interval; it returns the time cond first held.
func waitUntil(ctx context.Context, b *testing.B, what string, interval time.Duration, cond func() bool) time.Time {
	// Generous: the set-up waits share a 2-core machine with whatever else runs.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		if cond() {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func BenchmarkNetworkPolicy(b *testing.B) {
	harness.Require(b, "ovsdb-server", "ovn-northd", "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	r, err := harness.NewRun(harness.Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	central, err := r.StartOVNCentral(ctx)
	if err != nil {
		b.Fatal(err)
	}
	kube, err := r.StartKube(ctx, harness.KubeOptions{APIServerOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	rc := kube.RESTConfig()
	rc.QPS, rc.Burst = 5000, 5000
	kc := kubernetes.NewForConfigOrDie(rc)
	masterBin := masterBinary(ctx, b, r)

	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		b.Fatal(err)
	}
	w := &nbWatch{}
	w.c, err = ovsdb.New(ctx, dbModel, ovsdb.Config{Remotes: central.NBRemote, Tables: []ovsdb.Table{
		{Model: &nbdb.ACL{}}, {Model: &nbdb.PortGroup{}}, {Model: &nbdb.AddressSet{}}, {Model: &nbdb.LogicalSwitchPort{}},
		{Model: &nbdb.LogicalSwitch{}}, {Model: &nbdb.LogicalRouter{}}, {Model: &nbdb.LogicalRouterPort{}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.c.Close()
	w.c.Cache().AddEventHandler(w)

	// The cluster: nodes with their subnets, namespaces, pods with their addresses already
	// annotated (the master keeps annotated addresses), as if they had run for a while.
	start := time.Now()
	createObjects(ctx, b, kc)
	b.Logf("created %d nodes, %d namespaces, %d pods in %v", nodes, namespaces, namespaces*podsPerNS, time.Since(start).Round(time.Millisecond))

	startMaster := func(name string) *harness.Proc {
		p, err := r.Start(harness.ProcSpec{Name: name, Path: masterBin, Args: []string{
			"--kubeconfig", kube.Kubeconfig, "--nb-address", central.NBRemote,
			"--cluster-cidr", clusterCIDR, "--node-subnet-prefix", fmt.Sprint(nodeBits),
			"--leader-elect=false", "--kube-api-qps", "1000", "--kube-api-burst", "2000", "--log-level", "2"}})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	t0 := time.Now()
	m := startMaster("ovnt-master-pods")
	waitUntil(ctx, b, "pod ports", time.Second, func() bool {
		var l []nbdb.LogicalSwitchPort
		return w.count(ctx, &l) >= namespaces*podsPerNS
	})
	b.Logf("pod ports of %d pods in NB after %v", namespaces*podsPerNS, time.Since(t0).Round(time.Millisecond))
	if err := m.Stop(); err != nil {
		b.Logf("stopping the master: %v", err)
	}

	// Cold: the policies appear while no master runs; a starting master converges them.
	createPolicies(ctx, b, kc)
	time.Sleep(time.Second)
	nbPid := readPid(r.Path("central", "nb.pid"))
	nbCPU0 := cpuTime(nbPid)
	load0 := loadAvg()
	t0 = time.Now()
	m = startMaster("ovnt-master")
	defer m.Stop()
	waitUntil(ctx, b, "policy rows", 100*time.Millisecond, func() bool {
		var pgs []nbdb.PortGroup
		if w.count(ctx, &pgs) < namespaces*5 {
			return false
		}
		var as []nbdb.AddressSet
		return w.count(ctx, &as) >= 2*namespaces+1 && time.Since(time.Unix(0, w.last.Load())) > 3*time.Second
	})
	cold := time.Unix(0, w.last.Load()).Sub(t0)
	coldCPU, coldNBCPU := cpuTime(m.Pid()), cpuTime(nbPid)-nbCPU0
	// The start-up resync of every key (no-op diffs) may still be queued: wait until the
	// master is idle, so that the single changes below do not queue behind it.
	for prev := cpuTime(m.Pid()); ; {
		time.Sleep(time.Second)
		cur := cpuTime(m.Pid())
		if cur-prev < 50*time.Millisecond {
			break
		}
		prev = cur
	}
	idle := time.Since(t0)
	var acls []nbdb.ACL
	var pgs []nbdb.PortGroup
	var ass []nbdb.AddressSet
	nACL, nPG, nAS := w.count(ctx, &acls), w.count(ctx, &pgs), w.count(ctx, &ass)
	rss, hwm := procMem(m.Pid())

	rng := rand.New(rand.NewPCG(1, 2))
	// One pod label change: a frontend pod leaves its namespace's frontend peer and comes back.
	var labelLat []time.Duration
	var labelOps []int64
	for range samples {
		ns := nsName(rng.IntN(namespaces))
		pod := fmt.Sprintf("p%02d", 4*rng.IntN(podsPerNS/4)) // a frontend
		peer, _ := netpol.NewPeer(ns, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}})
		p, err := kc.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pn, _ := contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey])
		ip := pn.IPs[0].Addr().String()
		for _, app := range []string{"idle", "frontend"} {
			name := peer.AddressSetName()
			hit := w.expect(func(table string, m model.Model) bool {
				as, ok := m.(*nbdb.AddressSet)
				return ok && as.Name == name && slices.Contains(as.Addresses, ip) == (app == "frontend")
			})
			before := w.changes.Load()
			t := time.Now()
			patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
			if _, err := kc.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			done := await(ctx, b, "address set "+name, hit)
			labelLat = append(labelLat, done.Sub(t))
			time.Sleep(300 * time.Millisecond) // let every follow-up write land
			labelOps = append(labelOps, w.changes.Load()-before)
		}
	}

	// One policy change: a rule's port moves and back.
	var polLat []time.Duration
	var polOps []int64
	for range samples {
		ns := nsName(rng.IntN(namespaces))
		for _, port := range []int{8081, 8080} {
			name := ns + "/backend-from-frontend/ingress-0"
			want := fmt.Sprintf("tcp.dst == %d", port)
			hit := w.expect(func(table string, m model.Model) bool {
				a, ok := m.(*nbdb.ACL)
				return ok && a.Name != nil && *a.Name == name && strings.Contains(a.Match, want)
			})
			before := w.changes.Load()
			t := time.Now()
			patch := fmt.Sprintf(`{"spec":{"ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"frontend"}}}],"ports":[{"port":%d}]}]}}`, port)
			if _, err := kc.NetworkingV1().NetworkPolicies(ns).Patch(ctx, "backend-from-frontend", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			done := await(ctx, b, "ACL "+name, hit)
			polLat = append(polLat, done.Sub(t))
			time.Sleep(300 * time.Millisecond)
			polOps = append(polOps, w.changes.Load()-before)
		}
	}
	rss2, hwm2 := procMem(m.Pid())

	fmt.Printf("NetworkPolicy benchmark: %d namespaces x %d pods x 5 policies (%d pods, %d policies), %d nodes\n",
		namespaces, podsPerNS, namespaces*podsPerNS, namespaces*5, nodes)
	fmt.Printf("  cold convergence (master start, %d policies new): %v; master CPU %v, NB ovsdb-server CPU %v meanwhile; master idle after %v; load average at start %s\n",
		namespaces*5, cold.Round(time.Millisecond), coldCPU.Round(time.Millisecond), coldNBCPU.Round(time.Millisecond), idle.Round(time.Second), load0)
	fmt.Printf("  rows: %d ACLs, %d port groups, %d address sets\n", nACL, nPG, nAS)
	fmt.Printf("  pod label change -> NB: p50 %v, p99 %v, max %v; NB rows changed p50 %d, max %d (%d samples)\n",
		pct(labelLat, 50), pct(labelLat, 99), pct(labelLat, 100), pctInt(labelOps, 50), pctInt(labelOps, 100), len(labelLat))
	fmt.Printf("  policy change -> NB:    p50 %v, p99 %v, max %v; NB rows changed p50 %d, max %d (%d samples)\n",
		pct(polLat, 50), pct(polLat, 99), pct(polLat, 100), pctInt(polOps, 50), pctInt(polOps, 100), len(polLat))
	fmt.Printf("  master memory: RSS %d MiB after convergence, %d MiB at the end (peak %d MiB / %d MiB)\n", rss>>10, rss2>>10, hwm>>10, hwm2>>10)
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return s[i].Round(10 * time.Microsecond)
}

func pctInt(d []int64, p int) int64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return s[i]
}

// cpuTime returns the user+system CPU time pid has used.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func readPid(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var pid int
	fmt.Sscan(strings.TrimSpace(string(data)), &pid)
	return pid
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procMem returns VmRSS and VmHWM of pid in KiB.
func procMem(pid int) (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		var v int64
		if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &v); err == nil {
			rss = v
		}
		if _, err := fmt.Sscanf(l, "VmHWM: %d kB", &v); err == nil {
			hwm = v
		}
	}
	return rss, hwm
}

// masterBinary is $OVNT_BIN_DIR/ovnt-master, or one built into the run directory.
func masterBinary(ctx context.Context, b *testing.B, r *harness.Run) string {
	if dir := os.Getenv("OVNT_BIN_DIR"); dir != "" {
		return filepath.Join(dir, "ovnt-master")
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		b.Fatal(err)
	}
	bin := r.Path("ovnt-master")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ovnt-master")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./master: %v\n%s", err, out)
	}
	return bin
}

// parallel runs fn(i) for i in [0, n) on 32 goroutines and fails b on the first error.
func parallel(b *testing.B, n int, fn func(i int) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func createObjects(ctx context.Context, b *testing.B, kc kubernetes.Interface) []netip.Prefix {
	cluster := netip.MustParsePrefix(clusterCIDR)
	var subnets []netip.Prefix
	for i := range nodes {
		base := cluster.Addr().As4()
		base[1] += byte(i * 16 >> 8)
		base[2] += byte(i * 16)
		subnet := netip.PrefixFrom(netip.AddrFrom4(base), nodeBits)
		subnets = append(subnets, subnet)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%d", i+1),
			Annotations: map[string]string{contract.NodeSubnetKey: subnet.String()}}}
		if _, err := kc.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	parallel(b, namespaces, func(i int) error {
		lbls := map[string]string{"team": fmt.Sprintf("t%d", i%10)}
		if i%50 == 0 {
			lbls["monitoring"] = "true"
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i), Labels: lbls}}
		if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kc.CoreV1().ServiceAccounts(nsName(i)).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		return err
	})
	no := false
	perNode := namespaces * podsPerNS / nodes
	parallel(b, namespaces*podsPerNS, func(k int) error {
		i, j := k/podsPerNS, k%podsPerNS
		node := k / perNode
		base := subnets[node].Addr().As4()
		off := uint32(k%perNode) + 3
		ip := netip.AddrFrom4([4]byte{base[0], base[1], base[2] + byte(off>>8), base[3] + byte(off)})
		value, err := topology.PodNetwork(subnets[node], ip).Marshal()
		if err != nil {
			return err
		}
		metrics := int32(9100 + j%2) // the named port has two numbers in every namespace
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsName(i), Name: fmt.Sprintf("p%02d", j),
				Labels:      map[string]string{"app": apps[j%len(apps)]},
				Annotations: map[string]string{contract.PodNetworkKey: value}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node%d", node+1), AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: []corev1.ContainerPort{
					{Name: "metrics", ContainerPort: metrics}, {Name: "http", ContainerPort: 8080}}}}},
		}
		_, err = kc.CoreV1().Pods(nsName(i)).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	return subnets
}

func createPolicies(ctx context.Context, b *testing.B, kc kubernetes.Interface) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	port := func(n int) networkingv1.NetworkPolicyPort {
		p := intstr.FromInt(n)
		return networkingv1.NetworkPolicyPort{Port: &p}
	}
	metrics := intstr.FromString("metrics")
	parallel(b, namespaces, func(i int) error {
		ns := nsName(i)
		for _, p := range []networkingv1.NetworkPolicy{
			{ObjectMeta: metav1.ObjectMeta{Name: "default-deny"}, Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "backend-from-frontend"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *sel("app", "backend"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "frontend")}},
					Ports: []networkingv1.NetworkPolicyPort{port(8080)}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "metrics-from-monitoring"}, Spec: networkingv1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("monitoring", "true")}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &metrics}}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "backend-egress-db"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *sel("app", "backend"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "db")}},
					Ports: []networkingv1.NetworkPolicyPort{port(5432)}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "web-from-cidr"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *sel("app", "web"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
					CIDR: "172.16.0.0/12", Except: []string{"172.16.1.0/24"}}}},
					Ports: []networkingv1.NetworkPolicyPort{port(80), port(443)}}}}},
		} {
			p.Namespace = ns
			if _, err := kc.NetworkingV1().NetworkPolicies(ns).Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}
