//go:build linux

// Package services measures the master's Services path against a real NB and API server (no
// data plane): cold convergence of many Services, single EndpointSlice change latency, NB
// writes per change, NB rows per Service as nodes grow, and master memory. Run it with
// `make bench-services`; SVCBENCH_SERVICES, SVCBENCH_ENDPOINTS, SVCBENCH_NODES,
// SVCBENCH_MORE_NODES and SVCBENCH_CHANGES change the sizes; SVCBENCH_LOCAL_EVERY=k makes every
// k-th Service a NodePort with externalTrafficPolicy=Local (its load balancers per node: one
// on each node switch, one on each gateway router); SVCBENCH_MASTER_ARGS adds master flags;
// OVNT_KEEP_LOGS=1 keeps the daemons' logs.
package services

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/test/bench/benchutil"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

const ns = "svcbench"

// benchClusterCIDR is the master's cluster CIDR here: every endpointIP is in it.
const benchClusterCIDR = "10.128.0.0/9"

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkServices runs the whole scenario once, whatever b.N, and prints its figures.
func BenchmarkServices(b *testing.B) {
	harness.Require(b, "ovsdb-server", "ovn-northd", "ovn-nbctl", "etcd")
	nSvc, nEP := envInt("SVCBENCH_SERVICES", 5000), envInt("SVCBENCH_ENDPOINTS", 10)
	nNodes, moreNodes := envInt("SVCBENCH_NODES", 10), envInt("SVCBENCH_MORE_NODES", 100)
	nChanges := envInt("SVCBENCH_CHANGES", 200)
	localEvery := envInt("SVCBENCH_LOCAL_EVERY", 0)
	nLocal := 0
	if localEvery > 0 {
		nLocal = (nSvc + localEvery - 1) / localEvery // i = 0, k, 2k, ... below nSvc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
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
	restCfg, err := clientcmd.BuildConfigFromFlags("", kube.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	restCfg.QPS, restCfg.Burst = 5000, 10000
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		b.Fatal(err)
	}
	masterBin := benchutil.MasterBinary(ctx, b, r)

	// The objects first: nodes with chassis, Services, one EndpointSlice each.
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	createNodes(ctx, b, kc, 1, nNodes)
	t0 := time.Now()
	err = benchutil.Parallel(nSvc, 32, func(i int) error {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName(i)},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": svcName(i)},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if localEvery > 0 && i%localEvery == 0 {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
		}
		if _, err := kc.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(i, nEP, nNodes, 0), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("svcbench: %d Services x %d endpoints on %d nodes created in the API server in %s (%d of them NodePorts with externalTrafficPolicy=Local)\n",
		nSvc, nEP, nNodes, time.Since(t0).Round(time.Millisecond), nLocal)

	// A watcher of the NB, as an operator's client would see it.
	w := newWatcher(ctx, b, central.NBRemote, nEP)
	defer w.Close()

	start := time.Now()
	health, err := harness.FreeLocalAddr()
	if err != nil {
		b.Fatal(err)
	}
	// The endpoints are pods: their addresses (endpointIP) are in the cluster CIDR. A Service
	// with an endpoint outside it may be a host-network one, whose load balancers depend on
	// the nodes, and is synced again at every node change (services.NeedsNodes).
	args := []string{"--kubeconfig=" + kube.Kubeconfig, "--nb-address=" + central.NBRemote, "--kube-api-qps=1000", "--kube-api-burst=2000",
		"--health-address=" + health, "--" + contract.FlagClusterCIDR + "=" + benchClusterCIDR}
	args = append(args, strings.Fields(os.Getenv("SVCBENCH_MASTER_ARGS"))...) // e.g. --memory-limit-mib=80
	master, err := r.Start(harness.ProcSpec{Name: "ovnt-master", Path: masterBin, Args: args})
	if err != nil {
		b.Fatal(err)
	}
	defer master.Stop()
	w.waitConverged(ctx, b, nSvc)
	converge := time.Since(start)
	fmt.Printf("svcbench: cold start: master started -> NB converged (%d LBs with all backends, in the group): %s\n", nSvc, converge.Round(time.Millisecond))
	if nLocal > 0 {
		w.waitNodeLBs(ctx, b, 2*nLocal*nNodes)
		fmt.Printf("svcbench: cold start: master started -> the %d per-node LBs of the externalTrafficPolicy=Local Services written: %s\n",
			2*nLocal*nNodes, time.Since(start).Round(time.Millisecond))
	}
	fmt.Printf("svcbench: master memory after convergence: %s\n", benchutil.ProcMem(b, master.Pid()))

	// After converging, the master re-syncs every key once (finding nothing to do) and
	// northd digests the new rows: single changes are measured in the steady state after.
	idleCtx, cancelIdle := context.WithTimeout(ctx, 2*time.Minute)
	idle := benchutil.WaitIdle(idleCtx.Done(), master.Pid(), 500*time.Millisecond, 4)
	cancelIdle()
	fmt.Printf("svcbench: master idle (under 5%% CPU for 2 s) %s after convergence\n", idle.Round(100*time.Millisecond))
	nbFile := filepath.Join(central.Dir, "nb.db")
	gen := map[int]int{}
	// The master's own share of each change, from its histogram (the update call above is
	// dominated by the API server and etcd).
	metricsURL := "http://" + health + "/metrics"
	serviceSyncs := func() benchutil.Master {
		m, err := benchutil.ScrapeMaster(metricsURL, "Service")
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	h0 := serviceSyncs()
	lat, rows, bytes := changes(ctx, b, kc, w, nbFile, gen, nSvc, nEP, nNodes, nChanges)
	report(fmt.Sprintf("%d Services, %d nodes", nSvc, nNodes), lat, rows, bytes)
	fmt.Printf("svcbench: %d Services, %d nodes: %s\n", nSvc, nNodes, benchutil.MasterShare(metricsURL, h0))
	fmt.Printf("svcbench: NB rows per Service with %d nodes: %s\n", nNodes, w.rowsPerService(nSvc))

	if moreNodes > nNodes {
		t := time.Now()
		createNodes(ctx, b, kc, nNodes+1, moreNodes)
		w.waitGroupReferrers(ctx, b, 2*moreNodes)
		if nLocal > 0 {
			w.waitNodeLBs(ctx, b, 2*nLocal*moreNodes)
			fmt.Printf("svcbench: %d nodes more -> their switches, routers and %d per-node LBs written: %s\n",
				moreNodes-nNodes, 2*nLocal*(moreNodes-nNodes), time.Since(t).Round(time.Millisecond))
		}
		h0 = serviceSyncs()
		lat, rows, bytes = changes(ctx, b, kc, w, nbFile, gen, nSvc, nEP, nNodes, nChanges/2)
		report(fmt.Sprintf("%d Services, %d nodes", nSvc, moreNodes), lat, rows, bytes)
		fmt.Printf("svcbench: %d Services, %d nodes: %s\n", nSvc, moreNodes, benchutil.MasterShare(metricsURL, h0))
		fmt.Printf("svcbench: NB rows per Service with %d nodes: %s\n", moreNodes, w.rowsPerService(nSvc))
	}
	fmt.Printf("svcbench: master memory at the end: %s\n", benchutil.ProcMem(b, master.Pid()))
}

func svcName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// endpointIP is endpoint k of Service i, generation gen (a change moves one endpoint).
func endpointIP(i, k, gen int) string {
	n := i*16 + k
	if gen > 0 {
		n = 1<<20 + i*256 + gen%256 // a range no first-generation endpoint uses
	}
	return netip.AddrFrom4([4]byte{10, byte(128 + n>>16), byte(n >> 8), byte(n)}).String()
}

func slice(i, nEP, nNodes, gen int) *discoveryv1.EndpointSlice {
	port, proto, name := int32(8080), corev1.ProtocolTCP, "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName(i) + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for k := range nEP {
		node := fmt.Sprintf("node%d", 1+k%nNodes)
		g := 0
		if k == 0 {
			g = gen
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpointIP(i, k, g)}, NodeName: &node})
	}
	return s
}

func createNodes(ctx context.Context, b *testing.B, kc kubernetes.Interface, from, to int) {
	err := benchutil.Parallel(to-from+1, 16, func(j int) error {
		i := from + j
		info := contract.NodeChassisInfo{ChassisID: fmt.Sprintf("chassis-%d", i),
			NodeIP:     netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 18, byte(i >> 8), byte(i)}), 16).String(),
			GatewayMAC: fmt.Sprintf("0a:58:ac:12:%02x:%02x", i>>8, i&0xff), NextHop: "172.18.255.254", OS: "linux"}
		v, err := info.Marshal()
		if err != nil {
			return err
		}
		_, err = kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%d", i),
			Annotations: map[string]string{contract.NodeChassisKey: v}}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// changes moves one endpoint of a random Service, one change at a time, and measures the
// time from the update call to the NB watcher seeing the new backend, the rows the NB
// reported changed, and the bytes the NB appended to its log.
// gen counts the changes made to each Service so far.
func changes(ctx context.Context, b *testing.B, kc kubernetes.Interface, w *watcher, nbFile string, gen map[int]int, nSvc, nEP, nNodes, n int) (lat []time.Duration, rows []int64, bytes []int64) {
	var calls []time.Duration
	defer func() {
		p := benchutil.Percentiles(calls, 50, 99)
		fmt.Printf("svcbench: (the update call itself, API server and etcd only: p50 %s, p99 %s)\n",
			p[0].Round(10*time.Microsecond), p[1].Round(10*time.Microsecond))
	}()
	for range n {
		i := rand.IntN(nSvc)
		gen[i]++
		want := endpointIP(i, 0, gen[i]) + ":8080"
		lbName := "Service_" + ns + "/" + svcName(i) + "_TCP_cluster"
		seen := w.Expect(func(_ string, m model.Model) bool {
			lb, ok := m.(*nbdb.LoadBalancer)
			if !ok || lb.Name != lbName {
				return false
			}
			for _, v := range lb.Vips {
				if strings.Contains(v, want) {
					return true
				}
			}
			return false
		})
		before, _ := os.Stat(nbFile)
		rowsBefore := w.Changes()
		s := slice(i, nEP, nNodes, gen[i])
		cur, err := kc.DiscoveryV1().EndpointSlices(ns).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		s.ResourceVersion = cur.ResourceVersion
		t := time.Now()
		if _, err := kc.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		calls = append(calls, time.Since(t))
		at, err := benchutil.Await(ctx, want+" in "+lbName, seen, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, at.Sub(t))
		time.Sleep(20 * time.Millisecond) // let anything else this change caused arrive
		after, _ := os.Stat(nbFile)
		rows = append(rows, w.Changes()-rowsBefore)
		if d := after.Size() - before.Size(); d >= 0 { // negative: the NB compacted its log
			bytes = append(bytes, d)
		}
	}
	return lat, rows, bytes
}

func report(what string, lat []time.Duration, rows, bytes []int64) {
	p := benchutil.Percentiles(lat, 50, 99, 100)
	fmt.Printf("svcbench: %s: EndpointSlice update call -> NB updated, %d changes: p50 %s, p99 %s, max %s\n",
		what, len(lat), p[0].Round(10*time.Microsecond), p[1].Round(10*time.Microsecond), p[2].Round(10*time.Microsecond))
	r, by := benchutil.Percentiles(rows, 0, 50, 100), benchutil.Percentiles(bytes, 0, 50, 100)
	fmt.Printf("svcbench: %s: per single-endpoint change: NB rows changed (monitor) min/median/max %d/%d/%d; bytes appended to the NB log min/median/max %d/%d/%d\n",
		what, r[0], r[1], r[2], by[0], by[1], by[2])
}

// watcher follows the Service load balancers in the NB: which have all their backends.
type watcher struct {
	*benchutil.NBWatcher
	nEP      int
	mu       sync.Mutex
	complete map[string]bool // LB name -> every VIP has nEP backends
}

func newWatcher(ctx context.Context, b *testing.B, remote string, nEP int) *watcher {
	nw, err := benchutil.NewNBWatcher(ctx, remote, &nbdb.LoadBalancer{}, &nbdb.LoadBalancerGroup{},
		&nbdb.LogicalSwitch{}, &nbdb.LogicalRouter{}, &nbdb.ChassisTemplateVar{})
	if err != nil {
		b.Fatal(err)
	}
	w := &watcher{NBWatcher: nw, nEP: nEP, complete: map[string]bool{}}
	nw.Client.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { w.see(m) },
		UpdateFunc: func(_ string, _, m model.Model) { w.see(m) },
	})
	return w
}

func (w *watcher) see(m model.Model) {
	lb, ok := m.(*nbdb.LoadBalancer)
	if !ok || !strings.HasPrefix(lb.Name, "Service_"+ns+"/") {
		return
	}
	full := len(lb.Vips) > 0
	for _, v := range lb.Vips {
		full = full && strings.Count(v, ",")+1 == w.nEP
	}
	w.mu.Lock()
	w.complete[lb.Name] = full
	w.mu.Unlock()
}

// waitConverged waits until n Service LBs have all their backends and are in the group.
func (w *watcher) waitConverged(ctx context.Context, b *testing.B, n int) {
	poll.Eventually(b, ctx, "the NB converged", 0, 5*time.Millisecond, func() (bool, error) {
		w.mu.Lock()
		full := 0
		for _, ok := range w.complete {
			if ok {
				full++
			}
		}
		w.mu.Unlock()
		group := w.groupSize(ctx)
		return full >= n && group >= n, fmt.Errorf("%d of %d LBs complete, group holds %d", full, n, group)
	})
}

func (w *watcher) groupSize(ctx context.Context) int {
	var g []nbdb.LoadBalancerGroup
	if err := w.Client.List(ctx, &g); err != nil || len(g) == 0 {
		return 0
	}
	return len(g[0].LoadBalancer)
}

// waitGroupReferrers waits until n switches and routers reference the group.
func (w *watcher) waitGroupReferrers(ctx context.Context, b *testing.B, n int) {
	poll.Eventually(b, ctx, fmt.Sprintf("%d switches and routers referencing the group", n), 5*time.Minute, 100*time.Millisecond, func() (bool, error) {
		var ls []nbdb.LogicalSwitch
		var lr []nbdb.LogicalRouter
		_ = w.Client.List(ctx, &ls)
		_ = w.Client.List(ctx, &lr)
		got := 0
		for _, s := range ls {
			got += min(1, len(s.LoadBalancerGroup))
		}
		for _, r := range lr {
			got += min(1, len(r.LoadBalancerGroup))
		}
		return got >= n, fmt.Errorf("%d do", got)
	})
}

// waitNodeLBs waits until the NB holds n per-node Service LBs (node switch and gateway
// router ones).
func (w *watcher) waitNodeLBs(ctx context.Context, b *testing.B, n int) {
	poll.Eventually(b, ctx, fmt.Sprintf("%d per-node LBs", n), 10*time.Minute, 50*time.Millisecond, func() (bool, error) {
		var lbs []nbdb.LoadBalancer
		_ = w.Client.List(ctx, &lbs)
		got := 0
		for _, lb := range lbs {
			if strings.HasPrefix(lb.Name, "Service_"+ns+"/") && !strings.HasSuffix(lb.Name, "_cluster") {
				got++
			}
		}
		return got >= n, fmt.Errorf("%d written", got)
	})
}

func (w *watcher) rowsPerService(nSvc int) string {
	var lbs []nbdb.LoadBalancer
	var g []nbdb.LoadBalancerGroup
	var tv []nbdb.ChassisTemplateVar
	_ = w.Client.List(context.Background(), &lbs)
	_ = w.Client.List(context.Background(), &g)
	_ = w.Client.List(context.Background(), &tv)
	svcLBs := 0
	for _, lb := range lbs {
		if strings.HasPrefix(lb.Name, "Service_"+ns+"/") {
			svcLBs++
		}
	}
	return fmt.Sprintf("%.2f Load_Balancer rows per Service (%d for %d Services); shared: %d Load_Balancer_Group, %d Chassis_Template_Var (one per node)",
		float64(svcLBs)/float64(nSvc), svcLBs, nSvc, len(g), len(tv))
}
