//go:build linux

// Package netpol measures ovnt-master's NetworkPolicy work against a real Northbound
// database and API server, without a data plane: 500 namespaces x 20 pods x 5 policies.
// It prints figures; nothing asserts a time. Run it with `make bench-netpol`.
package netpol

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	masternetpol "github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/test/bench/benchutil"
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

// policyTables are the tables the master's NetworkPolicy work writes; the cold convergence
// ends with their last change (ovn-northd keeps writing the pod ports' up column meanwhile).
var policyTables = []string{nbdb.ACLTable, nbdb.PortGroupTable, nbdb.AddressSetTable}

// setupTimeout bounds the set-up waits, generously: they share a 2-core machine with whatever
// else runs.
const setupTimeout = 5 * time.Minute

func BenchmarkNetworkPolicy(b *testing.B) {
	harness.Require(b, "ovsdb-server", "ovn-northd", "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	r := harness.NewTestRun(b)
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
	masterBin := benchutil.MasterBinary(ctx, b, r)

	w, err := benchutil.NewNBWatcher(ctx, central.NBRemote, &nbdb.ACL{}, &nbdb.PortGroup{}, &nbdb.AddressSet{},
		&nbdb.LogicalSwitchPort{}, &nbdb.LogicalSwitch{}, &nbdb.LogicalRouter{}, &nbdb.LogicalRouterPort{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()

	// The cluster: nodes with their subnets, namespaces, pods with their addresses already
	// annotated (the master keeps annotated addresses), as if they had run for a while.
	start := time.Now()
	createObjects(ctx, b, kc)
	b.Logf("created %d nodes, %d namespaces, %d pods in %v", nodes, namespaces, namespaces*podsPerNS, time.Since(start).Round(time.Millisecond))

	// metricsURL is the /metrics page of the master that runs now.
	var metricsURL string
	startMaster := func(name string) *harness.Proc {
		health, err := harness.FreeLocalAddr()
		if err != nil {
			b.Fatal(err)
		}
		metricsURL = "http://" + health + "/metrics"
		p, err := r.Start(harness.ProcSpec{Name: name, Path: masterBin, Args: []string{
			"--kubeconfig", kube.Kubeconfig, "--nb-address", central.NBRemote,
			"--cluster-cidr", clusterCIDR, "--node-subnet-prefix", fmt.Sprint(nodeBits),
			"--leader-elect=false", "--kube-api-qps", "1000", "--kube-api-burst", "2000", "--log-level", "2",
			"--health-address", health}})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	// The master's own share of each change, from its histogram, by the kinds of keys a
	// change makes it sync (the API update call is dominated by the API server and etcd).
	syncs := func(kind nb.Kind) benchutil.Master {
		m, err := benchutil.ScrapeMaster(metricsURL, string(kind))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	var shares []string
	share := func(what string, before benchutil.Master) {
		shares = append(shares, fmt.Sprintf("  %s %s", what, benchutil.MasterShare(metricsURL, before)))
	}
	t0 := time.Now()
	m := startMaster("ovnt-master-pods")
	poll.Eventually(b, ctx, "pod ports", setupTimeout, time.Second, func() (bool, error) {
		var l []nbdb.LogicalSwitchPort
		n := w.Count(ctx, &l)
		return n >= namespaces*podsPerNS, fmt.Errorf("%d pod ports", n)
	})
	b.Logf("pod ports of %d pods in NB after %v", namespaces*podsPerNS, time.Since(t0).Round(time.Millisecond))
	if err := m.Stop(); err != nil {
		b.Logf("stopping the master: %v", err)
	}

	// Cold: the policies appear while no master runs; a starting master converges them.
	createPolicies(ctx, b, kc)
	time.Sleep(time.Second)
	nbPid := readPid(r.Path("central", "nb.pid"))
	nbCPU0 := benchutil.CPUTime(nbPid)
	load0 := loadAvg()
	t0 = time.Now()
	m = startMaster("ovnt-master")
	defer m.Stop()
	poll.Eventually(b, ctx, "policy rows", setupTimeout, 100*time.Millisecond, func() (bool, error) {
		var pgs []nbdb.PortGroup
		var as []nbdb.AddressSet
		nPG, nAS := w.Count(ctx, &pgs), w.Count(ctx, &as)
		quiet := time.Since(w.LastChange(policyTables...))
		return nPG >= namespaces*5 && nAS >= 2*namespaces+1 && quiet > 3*time.Second,
			fmt.Errorf("%d port groups, %d address sets, last policy row %v ago", nPG, nAS, quiet.Round(time.Millisecond))
	})
	cold := w.LastChange(policyTables...).Sub(t0)
	coldCPU, coldNBCPU := benchutil.CPUTime(m.Pid()), benchutil.CPUTime(nbPid)-nbCPU0
	// The start-up resync of every key (no-op diffs) may still be queued: wait until the
	// master is idle, so that the single changes below do not queue behind it.
	benchutil.WaitIdle(ctx.Done(), m.Pid(), time.Second, 1)
	idle := time.Since(t0)
	var acls []nbdb.ACL
	var pgs []nbdb.PortGroup
	var ass []nbdb.AddressSet
	nACL, nPG, nAS := w.Count(ctx, &acls), w.Count(ctx, &pgs), w.Count(ctx, &ass)
	mem := benchutil.ProcMem(b, m.Pid())

	rng := rand.New(rand.NewPCG(1, 2))
	h0 := syncs(nb.NetworkPolicyPeer)
	// One pod label change: a frontend pod leaves its namespace's frontend peer and comes back.
	var labelLat []time.Duration
	var labelOps []int64
	for range samples {
		ns := nsName(rng.IntN(namespaces))
		pod := fmt.Sprintf("p%02d", 4*rng.IntN(podsPerNS/4)) // a frontend
		peer, _ := masternetpol.NewPeer(ns, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}})
		p, err := kc.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pn, _ := contract.ParsePodNetwork(p.Annotations[contract.PodNetworkKey])
		ip := pn.IPs[0].Addr().String()
		for _, app := range []string{"idle", "frontend"} {
			name := peer.AddressSetName()
			hit := w.Expect(func(table string, m model.Model) bool {
				as, ok := m.(*nbdb.AddressSet)
				return ok && as.Name == name && slices.Contains(as.Addresses, ip) == (app == "frontend")
			})
			before := w.Changes()
			t := time.Now()
			patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
			if _, err := kc.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			done, err := benchutil.Await(ctx, "address set "+name, hit, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			labelLat = append(labelLat, done.Sub(t))
			time.Sleep(300 * time.Millisecond) // let every follow-up write land
			labelOps = append(labelOps, w.Changes()-before)
		}
	}

	share("pod label change:", h0)
	// One policy change: a rule's port moves and back.
	h0 = syncs(nb.NetworkPolicy)
	var polLat []time.Duration
	var polOps []int64
	for range samples {
		ns := nsName(rng.IntN(namespaces))
		for _, port := range []int{8081, 8080} {
			name := ns + "/backend-from-frontend/ingress-0"
			want := fmt.Sprintf("tcp.dst == %d", port)
			hit := w.Expect(func(table string, m model.Model) bool {
				a, ok := m.(*nbdb.ACL)
				return ok && a.Name != nil && *a.Name == name && strings.Contains(a.Match, want)
			})
			before := w.Changes()
			t := time.Now()
			patch := fmt.Sprintf(`{"spec":{"ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"frontend"}}}],"ports":[{"port":%d}]}]}}`, port)
			if _, err := kc.NetworkingV1().NetworkPolicies(ns).Patch(ctx, "backend-from-frontend", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			done, err := benchutil.Await(ctx, "ACL "+name, hit, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			polLat = append(polLat, done.Sub(t))
			time.Sleep(300 * time.Millisecond)
			polOps = append(polOps, w.Changes()-before)
		}
	}
	share("policy change:   ", h0)
	mem2 := benchutil.ProcMem(b, m.Pid())

	fmt.Printf("NetworkPolicy benchmark: %d namespaces x %d pods x 5 policies (%d pods, %d policies), %d nodes\n",
		namespaces, podsPerNS, namespaces*podsPerNS, namespaces*5, nodes)
	fmt.Printf("  cold convergence (master start, %d policies new): %v; master CPU %v, NB ovsdb-server CPU %v meanwhile; master idle after %v; load average at start %s\n",
		namespaces*5, cold.Round(time.Millisecond), coldCPU.Round(time.Millisecond), coldNBCPU.Round(time.Millisecond), idle.Round(time.Second), load0)
	fmt.Printf("  rows: %d ACLs, %d port groups, %d address sets\n", nACL, nPG, nAS)
	printChange := func(what string, lat []time.Duration, ops []int64) {
		l, o := benchutil.Percentiles(lat, 50, 99, 100), benchutil.Percentiles(ops, 50, 100)
		fmt.Printf("  %s p50 %v, p99 %v, max %v; NB rows changed p50 %d, max %d (%d samples)\n", what,
			l[0].Round(10*time.Microsecond), l[1].Round(10*time.Microsecond), l[2].Round(10*time.Microsecond), o[0], o[1], len(lat))
	}
	printChange("pod label change -> NB:", labelLat, labelOps)
	printChange("policy change -> NB:   ", polLat, polOps)
	for _, l := range shares {
		fmt.Println(l)
	}
	fmt.Printf("  master memory: after convergence %s; at the end %s\n", mem, mem2)
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
	if err := benchutil.Parallel(namespaces, 32, func(i int) error {
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
	}); err != nil {
		b.Fatal(err)
	}
	no := false
	perNode := namespaces * podsPerNS / nodes
	if err := benchutil.Parallel(namespaces*podsPerNS, 32, func(k int) error {
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
	}); err != nil {
		b.Fatal(err)
	}
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
	if err := benchutil.Parallel(namespaces, 32, func(i int) error {
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
	}); err != nil {
		b.Fatal(err)
	}
}
