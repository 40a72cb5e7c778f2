//go:build linux

// Package svcbench measures the master's Services path against a real NB and API server (no
// data plane): cold convergence of many Services, single EndpointSlice change latency, NB
// writes per change, NB rows per Service as nodes grow, and master memory. Run it with
// `make bench-services`; SVCBENCH_SERVICES, SVCBENCH_ENDPOINTS, SVCBENCH_NODES,
// SVCBENCH_MORE_NODES and SVCBENCH_CHANGES change the sizes; SVCBENCH_MASTER_ARGS adds master
// flags.
package svcbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

const ns = "svcbench"

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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r, err := harness.NewRun(harness.Options{Logf: b.Logf, KeepLogs: os.Getenv("SVCBENCH_KEEP_LOGS") != ""})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if b.Failed() {
			r.MarkFailed()
		}
		r.Close()
	}()
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
	binDir := os.Getenv("OVNT_BIN_DIR")
	if binDir == "" {
		binDir = r.Path("bin")
		if err := cluster.BuildBinaries(ctx, binDir); err != nil {
			b.Fatal(err)
		}
	}

	// The objects first: nodes with chassis, Services, one EndpointSlice each.
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	createNodes(ctx, b, kc, 1, nNodes)
	t0 := time.Now()
	parallel(b, nSvc, 32, func(i int) error {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName(i)},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": svcName(i)},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := kc.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(i, nEP, nNodes, 0), metav1.CreateOptions{})
		return err
	})
	fmt.Printf("svcbench: %d Services x %d endpoints on %d nodes created in the API server in %s\n", nSvc, nEP, nNodes, time.Since(t0).Round(time.Millisecond))

	// A watcher of the NB, as an operator's client would see it.
	w := newWatcher(ctx, b, central.NBRemote, nEP)
	defer w.c.Close()

	start := time.Now()
	args := []string{"--kubeconfig=" + kube.Kubeconfig, "--nb-address=" + central.NBRemote, "--kube-api-qps=1000", "--kube-api-burst=2000"}
	args = append(args, strings.Fields(os.Getenv("SVCBENCH_MASTER_ARGS"))...) // e.g. --memory-limit-mib=80
	master, err := r.Start(harness.ProcSpec{Name: "ovnt-master", Path: filepath.Join(binDir, "ovnt-master"), Args: args})
	if err != nil {
		b.Fatal(err)
	}
	defer master.Stop()
	w.waitConverged(ctx, b, nSvc)
	converge := time.Since(start)
	fmt.Printf("svcbench: cold start: master started -> NB converged (%d LBs with all backends, in the group): %s\n", nSvc, converge.Round(time.Millisecond))
	fmt.Printf("svcbench: master RSS after convergence: %s\n", rss(master.Pid()))

	// After converging, the master re-syncs every key once (finding nothing to do) and
	// northd digests the new rows: single changes are measured in the steady state after.
	idle := waitIdle(ctx, master.Pid())
	fmt.Printf("svcbench: master idle (under 5%% CPU for 2 s) %s after convergence\n", idle.Round(100*time.Millisecond))
	nbFile := filepath.Join(central.Dir, "nb.db")
	gen := map[int]int{}
	lat, rows, bytes := changes(ctx, b, kc, w, nbFile, gen, nSvc, nEP, nNodes, nChanges)
	report(fmt.Sprintf("%d Services, %d nodes", nSvc, nNodes), lat, rows, bytes)
	fmt.Printf("svcbench: NB rows per Service with %d nodes: %s\n", nNodes, w.rowsPerService(nSvc))

	if moreNodes > nNodes {
		createNodes(ctx, b, kc, nNodes+1, moreNodes)
		w.waitGroupReferrers(ctx, b, 2*moreNodes)
		lat, rows, bytes = changes(ctx, b, kc, w, nbFile, gen, nSvc, nEP, nNodes, nChanges/2)
		report(fmt.Sprintf("%d Services, %d nodes", nSvc, moreNodes), lat, rows, bytes)
		fmt.Printf("svcbench: NB rows per Service with %d nodes: %s\n", moreNodes, w.rowsPerService(nSvc))
	}
	fmt.Printf("svcbench: master RSS at the end: %s\n", rss(master.Pid()))
}

// waitIdle waits until process pid has used under 5% of a CPU in each of four consecutive
// half seconds, and returns how long that took.
func waitIdle(ctx context.Context, pid int) time.Duration {
	start := time.Now()
	cpu := func() int {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		return u + s // clock ticks, 100 per second
	}
	quiet := 0
	for ctx.Err() == nil && time.Since(start) < 2*time.Minute && quiet < 4 {
		before := cpu()
		time.Sleep(500 * time.Millisecond)
		if cpu()-before <= 2 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return time.Since(start)
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
	parallel(b, to-from+1, 16, func(j int) error {
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
}

func parallel(b *testing.B, n, workers int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
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
		slices.Sort(calls)
		fmt.Printf("svcbench: (the update call itself, API server and etcd only: p50 %s, p99 %s)\n",
			calls[len(calls)/2].Round(10*time.Microsecond), calls[min(len(calls)-1, len(calls)*99/100)].Round(10*time.Microsecond))
	}()
	for range n {
		i := rand.IntN(nSvc)
		gen[i]++
		want := endpointIP(i, 0, gen[i]) + ":8080"
		lbName := "Service_" + ns + "/" + svcName(i) + "_TCP_cluster"
		seen := w.expect(lbName, want)
		before, _ := os.Stat(nbFile)
		rowsBefore := w.rowEvents.Load()
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
		select {
		case at := <-seen:
			lat = append(lat, at.Sub(t))
		case <-time.After(10 * time.Second):
			b.Fatalf("the NB never showed %s in %s", want, lbName)
		}
		time.Sleep(20 * time.Millisecond) // let anything else this change caused arrive
		after, _ := os.Stat(nbFile)
		rows = append(rows, w.rowEvents.Load()-rowsBefore)
		if d := after.Size() - before.Size(); d >= 0 { // negative: the NB compacted its log
			bytes = append(bytes, d)
		}
	}
	return lat, rows, bytes
}

func report(what string, lat []time.Duration, rows, bytes []int64) {
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("svcbench: %s: EndpointSlice update call -> NB updated, %d changes: p50 %s, p99 %s, max %s\n",
		what, len(lat), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	fmt.Printf("svcbench: %s: per single-endpoint change: NB rows changed (monitor) min/median/max %d/%d/%d; bytes appended to the NB log min/median/max %d/%d/%d\n",
		what, mn(rows), med(rows), mx(rows), mn(bytes), med(bytes), mx(bytes))
}

func med(v []int64) int64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
func mn(v []int64) int64  { return slices.Min(v) }
func mx(v []int64) int64  { return slices.Max(v) }

func rss(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.Atoi(f[1])
			out = append(out, fmt.Sprintf("%s %.1f MiB", strings.TrimSuffix(f[0], ":"), float64(kb)/1024))
		}
	}
	return strings.Join(out, ", ")
}

// watcher is a libovsdb client of the NB that follows the load balancers.
type watcher struct {
	c         client.Client
	nEP       int
	rowEvents atomic.Int64
	mu        sync.Mutex
	complete  map[string]bool // LB name -> every VIP has nEP backends
	waitName  string
	waitFor   string
	waitCh    chan time.Time
}

func newWatcher(ctx context.Context, b *testing.B, remote string, nEP int) *watcher {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		b.Fatal(err)
	}
	c, err := ovsdb.New(ctx, dbModel, ovsdb.Config{Remotes: remote, Logger: logr.Discard(), Tables: []ovsdb.Table{
		{Model: &nbdb.LoadBalancer{}}, {Model: &nbdb.LoadBalancerGroup{}}, {Model: &nbdb.LogicalSwitch{}},
		{Model: &nbdb.LogicalRouter{}}, {Model: &nbdb.ChassisTemplateVar{}}}})
	if err != nil {
		b.Fatal(err)
	}
	w := &watcher{c: c, nEP: nEP, complete: map[string]bool{}}
	c.Cache().AddEventHandler(w)
	return w
}

func (w *watcher) OnAdd(table string, m model.Model)         { w.rowEvents.Add(1); w.see(m) }
func (w *watcher) OnUpdate(table string, old, m model.Model) { w.rowEvents.Add(1); w.see(m) }
func (w *watcher) OnDelete(table string, m model.Model)      { w.rowEvents.Add(1) }
func (w *watcher) expect(name, backend string) <-chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waitName, w.waitFor, w.waitCh = name, backend, make(chan time.Time, 1)
	return w.waitCh
}

func (w *watcher) see(m model.Model) {
	lb, ok := m.(*nbdb.LoadBalancer)
	if !ok || !strings.HasPrefix(lb.Name, "Service_"+ns+"/") {
		return
	}
	now := time.Now()
	full := len(lb.Vips) > 0
	for _, v := range lb.Vips {
		full = full && strings.Count(v, ",")+1 == w.nEP
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.complete[lb.Name] = full
	if lb.Name == w.waitName && w.waitCh != nil {
		for _, v := range lb.Vips {
			if strings.Contains(v, w.waitFor) {
				w.waitCh <- now
				w.waitCh = nil
			}
		}
	}
}

// waitConverged waits until n Service LBs have all their backends and are in the group.
func (w *watcher) waitConverged(ctx context.Context, b *testing.B, n int) {
	for {
		w.mu.Lock()
		full := 0
		for _, ok := range w.complete {
			if ok {
				full++
			}
		}
		w.mu.Unlock()
		if full >= n && w.groupSize(ctx) >= n {
			return
		}
		select {
		case <-ctx.Done():
			b.Fatalf("NB not converged: %d of %d LBs complete, group holds %d", full, n, w.groupSize(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (w *watcher) groupSize(ctx context.Context) int {
	var g []nbdb.LoadBalancerGroup
	if err := w.c.List(ctx, &g); err != nil || len(g) == 0 {
		return 0
	}
	return len(g[0].LoadBalancer)
}

// waitGroupReferrers waits until n switches and routers reference the group.
func (w *watcher) waitGroupReferrers(ctx context.Context, b *testing.B, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var ls []nbdb.LogicalSwitch
		var lr []nbdb.LogicalRouter
		_ = w.c.List(ctx, &ls)
		_ = w.c.List(ctx, &lr)
		got := 0
		for _, s := range ls {
			got += min(1, len(s.LoadBalancerGroup))
		}
		for _, r := range lr {
			got += min(1, len(r.LoadBalancerGroup))
		}
		if got >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("fewer than %d switches and routers reference the group", n)
}

func (w *watcher) rowsPerService(nSvc int) string {
	var lbs []nbdb.LoadBalancer
	var g []nbdb.LoadBalancerGroup
	var tv []nbdb.ChassisTemplateVar
	_ = w.c.List(context.Background(), &lbs)
	_ = w.c.List(context.Background(), &g)
	_ = w.c.List(context.Background(), &tv)
	svcLBs := 0
	for _, lb := range lbs {
		if strings.HasPrefix(lb.Name, "Service_"+ns+"/") {
			svcLBs++
		}
	}
	return fmt.Sprintf("%.2f Load_Balancer rows per Service (%d for %d Services); shared: %d Load_Balancer_Group, %d Chassis_Template_Var (one per node)",
		float64(svcLBs)/float64(nSvc), svcLBs, nSvc, len(g), len(tv))
}
