//go:build linux

package deployreal

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestAnsibleSite runs playbooks/site.yml over SSH against seven machines: three
// ovn_central (RAFT NB and SB over TLS), two masters (ovnt-master under systemd, a
// DynamicUser that reads its kubeconfig and NB client certificate as credentials, leader
// election through a Lease of the API server, which the test runs on the controller's
// underlay address) and two linux_nodes (OVS's userspace datapath), on which the test first
// installs kubelet and containerd, as an operator's cluster has them. The second run changes
// nothing on any host. Then: the node daemons run and each chassis is in the SB; pods on
// both nodes reach each other and a Service; the NB has the cluster router and a switch for
// each Node; the NB RAFT leader's machine is killed and a new Node still gets its switch;
// the master machine holding the Lease is killed, the other master takes the Lease, a new
// Node gets its switch, and new pods reach each other and a new Service.
//
// Opt-in like TestAnsibleCentral: make deploy-test sets OVNT_ANSIBLE_MACHINES=1.
func TestAnsibleSite(t *testing.T) {
	requireMachines(t, "ansible-playbook")
	rootfs := machineRootfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	bin, err := cluster.BinDir(ctx, r.Path("bin"))
	if err != nil {
		t.Fatal(err)
	}
	a, pub := newController(ctx, t, r)

	// The control plane (its controllers make the Services' EndpointSlices), the API server
	// reachable from the machines at the controller's address, and the master's kubeconfig
	// (ServiceAccount ovnt-master) naming that address.
	kube, err := r.StartKube(ctx, harness.KubeOptions{AdvertiseAddress: a.ip})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.ExposeAt(a.netns, a.ip); err != nil {
		t.Fatal(err)
	}
	objs, err := images.RBACObjects()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ApplyObjects(ctx, kube.RESTConfig(), objs, false); err != nil {
		t.Fatal(err)
	}
	host, err := url.Parse(kube.Host)
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + a.ip + ":" + host.Port()
	kubeconfig := r.Path("ansible", "ovnt-master.kubeconfig")
	if err := cluster.ServiceAccountKubeconfig(ctx, kube, images.MasterServiceAccount, kubeconfig); err != nil {
		t.Fatal(err)
	}
	atServer(t, kubeconfig, server)
	client := kube.Client()
	// Each node's agent: a token of ServiceAccount ovnt-node bound to its Node (the
	// manifests' admission policy lets it write that Node only), as the operator makes
	// one for a node the kubelet registered.
	for _, name := range []string{"node1", "node2"} {
		node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := client.CoreV1().ServiceAccounts(images.Namespace).CreateToken(ctx, images.NodeServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: node.UID}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.LoadFromFile(kube.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, ai := range cfg.AuthInfos {
			ai.Token = tr.Status.Token
		}
		if err := clientcmd.WriteToFile(*cfg, r.Path("ansible", name+".kubeconfig")); err != nil {
			t.Fatal(err)
		}
		atServer(t, r.Path("ansible", name+".kubeconfig"), server)
	}

	start := time.Now()
	boot := func(names ...string) []*machine {
		var ms []*machine
		for _, name := range names {
			m, err := startMachine(ctx, r, name, rootfs, pub)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return ms
	}
	centrals := boot("central1", "central2", "central3")
	masters := boot("master1", "master2")
	nodes := boot("node1", "node2")
	all := append(append(append([]*machine{}, centrals...), masters...), nodes...)
	t.Logf("%d machines booted (systemd, sshd) in %s", len(all), time.Since(start).Round(time.Second))
	// The node machines run kubelet and containerd before ovn-transparent, as in an
	// operator's cluster; the Nodes turn Ready once ovnt-node installs the CNI config.
	kubeBin, err := harness.EnsureKubeBinaries(ctx, harness.KubeVersion, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := nodeMachineImages(ctx, r, bin, kubeBin)
	if err != nil {
		t.Fatal(err)
	}
	kubeletConfig := r.Path("ansible", "kubelet.kubeconfig")
	if out, err := exec.Command("cp", kube.Kubeconfig, kubeletConfig).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	atServer(t, kubeletConfig, server)
	for _, m := range nodes {
		installKubelet(ctx, t, r, a, m, kubeBin, kubeletConfig, archives)
	}
	inv := a.inventoryOf([]group{{"ovn_central", centrals}, {"masters", masters}, {"linux_nodes", nodes}}, map[string]string{
		"ovnt_binaries_dir":          bin,
		"ovnt_master_kubeconfig_src": kubeconfig,
		"ovnt_node_kubeconfig_src":   r.Path("ansible") + "/{{ inventory_hostname }}.kubeconfig",
		// This kernel has no openvswitch module: OVS's userspace datapath, as with DPDK.
		"ovnt_node_datapath_type": "netdev",
	})
	a.playbookTwice(ctx, inv, "playbooks/site.yml", all)

	for _, m := range masters {
		if out := a.trySSH(ctx, m, "systemctl", "is-active", "ovnt-master"); strings.TrimSpace(out) != "active" {
			t.Errorf("%s: ovnt-master %q: %s", m.name, out, a.trySSH(ctx, m, "journalctl", "-u", "ovnt-master", "-n", "30", "--no-pager"))
		}
	}
	nbctl := func(m *machine, args ...string) string {
		return a.trySSH(ctx, m, append([]string{"ovn-nbctl", "--no-leader-only", "--timeout=20"}, args...)...)
	}
	// nodeSwitch creates a Node and waits for its logical switch in the NB of central m.
	nodeSwitch := func(name string, m *machine) {
		t.Helper()
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		poll.Eventually(t, ctx, "the switch of Node "+name+" in the NB of "+m.name, 2*time.Minute, time.Second, func() (bool, error) {
			return strings.Contains(nbctl(m, "--bare", "--columns=name", "find", "Logical_Switch", "name="+name), name), nil
		})
		t.Logf("Node %s: its switch in the NB of %s after %s", name, m.name, time.Since(start).Round(time.Millisecond))
	}
	poll.Eventually(t, ctx, "the cluster router in the NB", 2*time.Minute, time.Second, func() (bool, error) {
		return strings.Contains(nbctl(centrals[0], "lr-list"), "ovn_cluster_router"), nil
	})
	sbctl := func(m *machine, args ...string) string {
		return a.trySSH(ctx, m, append([]string{"ovn-sbctl", "--no-leader-only", "--timeout=20"}, args...)...)
	}
	for _, m := range nodes {
		if out := a.trySSH(ctx, m, "systemctl", "is-active", "ovnt-node", "ovn-controller", "openvswitch-switch"); out != "active\nactive\nactive\n" {
			t.Errorf("%s: ovnt-node, ovn-controller, openvswitch-switch %q: %s", m.name, out, a.trySSH(ctx, m, "journalctl", "-u", "ovnt-node", "-n", "30", "--no-pager"))
		}
		if out := a.trySSH(ctx, m, "ovs-vsctl", "get", "Bridge", "br-int", "datapath_type"); strings.TrimSpace(out) != "netdev" {
			t.Errorf("%s: br-int's datapath_type %q, want netdev", m.name, out)
		}
		poll.Eventually(t, ctx, "chassis "+m.name+" in the SB with its encapsulation", 2*time.Minute, time.Second, func() (bool, error) {
			out := sbctl(centrals[0], "--bare", "--columns=encaps", "find", "Chassis", "name="+m.name)
			return strings.TrimSpace(out) != "", nil
		})
	}
	podChecks(ctx, t, client, "first")
	nodeSwitch("worker1", centrals[0])
	t.Logf("NB topology on %s:\n%s", centrals[0].name, nbctl(centrals[0], "show"))

	// The NB RAFT leader's machine stops: the others elect a leader, the master reconnects.
	leader := raftLeader(ctx, a, centrals, "ovnnb_db", "OVN_Northbound")
	if leader == nil {
		t.Fatal("no NB leader")
	}
	leader.boot.Stop()
	t.Logf("killed %s, the NB leader", leader.name)
	var survivor *machine
	for _, m := range centrals {
		if m != leader {
			survivor = m
		}
	}
	nodeSwitch("worker2", survivor)

	// The master holding the Lease stops: the other takes it.
	holder := func() string { return leaseHolder(ctx, client) }
	first := holder()
	var leading *machine
	for _, m := range masters {
		if strings.HasPrefix(first, m.name+"_") {
			leading = m
		}
	}
	if leading == nil {
		t.Fatalf("the Lease's holder %q is none of the masters", first)
	}
	leading.boot.Stop()
	start = time.Now()
	poll.Eventually(t, ctx, "the other master holds the Lease", 3*time.Minute, time.Second, func() (bool, error) {
		h := holder()
		return h != "" && h != first, nil
	})
	t.Logf("killed %s, the leading master: %s leads after %s", leading.name, holder(), time.Since(start).Round(time.Second))
	nodeSwitch("worker3", survivor)
	podChecks(ctx, t, client, "after-failover")
}

// podChecks runs a server pod on each of node1 and node2 and a Service of both, then a
// client pod on each node that connects to the other node's server pod and to the Service
// (agnhost connect, retried by the kubelet until it succeeds). Names are prefixed by tag.
func podChecks(ctx context.Context, t *testing.T, client kubernetes.Interface, tag string) {
	t.Helper()
	start := time.Now()
	const ns = "default"
	ips := map[string]string{}
	for _, node := range []string{"node1", "node2"} {
		p := netexec(ns, tag+"-web-"+node, node)
		p.Labels["app"] = tag + "-web"
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tag + "-web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": tag + "-web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"node1", "node2"} {
		name := tag + "-web-" + node
		poll.Eventually(t, ctx, "pod "+name+" ready (the kubelet's probe from its node)", 3*time.Minute, time.Second, func() (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ips[node] = p.Status.PodIP
					return true, nil
				}
			}
			return false, nil
		})
	}
	t.Logf("%s: server pods ready on node1 (%s) and node2 (%s) after %s", tag, ips["node1"], ips["node2"], time.Since(start).Round(time.Second))
	other := map[string]string{"node1": "node2", "node2": "node1"}
	var clients []string
	for _, node := range []string{"node1", "node2"} {
		for what, target := range map[string]string{"pod": ips[other[node]] + ":8080", "svc": svc.Spec.ClusterIP + ":80"} {
			p := agnhost(ns, tag+"-"+what+"-from-"+node, node, "connect", "--timeout=3s", target)
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			clients = append(clients, p.Name)
		}
	}
	for _, name := range clients {
		poll.Eventually(t, ctx, "client pod "+name+" connected", 3*time.Minute, time.Second, func() (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
		})
	}
	t.Logf("%s: pods on each node reached the other node's pod and the Service %s after %s", tag, svc.Spec.ClusterIP, time.Since(start).Round(time.Second))
}

// atServer rewrites the kubeconfig at path to reach the API server at server.
func atServer(t *testing.T, path, server string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// raftLeader returns the machine whose server of database name (control socket ctl) is the
// RAFT leader, or nil.
func raftLeader(ctx context.Context, a *controller, ms []*machine, ctl, name string) *machine {
	for _, m := range ms {
		if strings.Contains(a.trySSH(ctx, m, "ovn-appctl", "-t", "/var/run/ovn/"+ctl+".ctl", "cluster/status", name), "Role: leader") {
			return m
		}
	}
	return nil
}

// playbookTwice runs a playbook twice: the first run must succeed on every machine, the
// second must also change nothing (changed=0). With OVNT_PLAYBOOK_ONCE set (CI's budget:
// the second run costs as much as the first), the first run alone; make deploy-test runs
// both.
func (a *controller) playbookTwice(ctx context.Context, inv, playbook string, ms []*machine) {
	t := a.t
	t.Helper()
	runs := 2
	if os.Getenv("OVNT_PLAYBOOK_ONCE") != "" {
		runs = 1
		t.Logf("OVNT_PLAYBOOK_ONCE: %s runs once, its second run (changed=0) is left to make deploy-test", playbook)
	}
	for i := 1; i <= runs; i++ {
		start := time.Now()
		recap := a.playbook(ctx, inv, playbook)
		t.Logf("run %d of %s in %s: %v", i, playbook, time.Since(start).Round(time.Second), recap)
		for _, m := range ms {
			st, ok := recap[m.name]
			if !ok || st["failed"] != "0" || st["unreachable"] != "0" {
				t.Fatalf("run %d: %s: %v", i, m.name, st)
			}
			if i == 2 && st["changed"] != "0" {
				t.Errorf("second run: %s changed=%s, want 0", m.name, st["changed"])
			}
		}
	}
}
