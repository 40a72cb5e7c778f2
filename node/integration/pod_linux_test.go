package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/hostnet"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// pod is a pod of the test: a network namespace, a Pod object bound to its node, and
// (unless the test wants otherwise) the master's annotation and logical switch port.
type pod struct {
	name, uid   string
	netns       string // full name; its path is /run/netns/<netns>
	containerID string
	node        *node
	ip          netip.Prefix
	mac         net.HardwareAddr
}

func (p *pod) netnsPath() string { return "/run/netns/" + p.netns }
func (p *pod) lsp() string       { return contract.PodPort("default", p.name) }
func (p *pod) hostIf() string    { return hostnet.HostIfName(p.containerID, "eth0") }

// rt is the runtime configuration a container runtime passes for the pod's sandbox.
func (p *pod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.containerID, NetNS: p.netnsPath(), IfName: "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.containerID}, {"K8S_POD_UID", p.uid},
		},
	}
}

type podOpts struct {
	noPod, noAnnotation, noLSP bool
}

// newPod makes pod name on n with address host number hostNum of n's subnet.
func (e *env) newPod(ctx context.Context, t *testing.T, n *node, name string, hostNum int, o podOpts) *pod {
	t.Helper()
	ip := n.subnet.Addr()
	for range hostNum {
		ip = ip.Next()
	}
	p := &pod{name: name, node: n, ip: netip.PrefixFrom(ip, n.subnet.Bits()), mac: contract.MACFromIP(ip),
		containerID: fmt.Sprintf("%064x", []byte(name))[:64]}
	var err error
	if p.netns, err = e.r.AddNetns("p-" + name); err != nil {
		t.Fatal(err)
	}
	p.uid = "uid-of-" + name
	if !o.noPod {
		p.uid = e.createPod(ctx, t, p, !o.noAnnotation)
	}
	if !o.noLSP {
		if _, err := e.central.NBCtl(ctx, "--", "lsp-add", n.Name, p.lsp(),
			"--", "lsp-set-addresses", p.lsp(), fmt.Sprintf("%s %s", p.mac, ip)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (e *env) createPod(ctx context.Context, t *testing.T, p *pod, annotate bool) string {
	t.Helper()
	no := false
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:                     p.node.Name,
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if annotate {
		obj.Annotations[contract.PodNetworkKey] = podNetwork(t, p)
	}
	created, err := e.client.CoreV1().Pods("default").Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(created.UID)
}

// podNetwork is the annotation the master would write: the address, its MAC, the subnet's
// gateway, and (to exercise extra routes) the service range through the gateway.
func podNetwork(t *testing.T, p *pod) string {
	gw := p.node.gateway().String()
	v, err := contract.PodNetworkInfo{
		IPAddresses: []string{p.ip.String()}, MACAddress: p.mac.String(), GatewayIPs: []string{gw},
		Routes: []contract.Route{{Dest: serviceCIDR, NextHop: gw}},
	}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// runtime is a container runtime's view of the network: libcni with the plugin directory
// and the configuration list the node's agent installed, at cniVersion (without its
// cniVersions, from which this libcni would pick the newest; testRuntimes runs the list as
// installed).
type runtime struct {
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

func (e *env) runtime(t *testing.T, n *node, version, cacheDir string) *runtime {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.confDir, cni.ConfListName))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	raw["cniVersion"] = version
	delete(raw, "cniVersions")
	if data, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime{cni: libcni.NewCNIConfigWithCacheDir([]string{n.binDir}, cacheDir, nil), list: list}
}

// assertGone checks that nothing of the pod's attachment is left: no port in the switch,
// no host interface, no interface in the pod's namespace.
func assertGone(ctx context.Context, t *testing.T, p *pod) {
	t.Helper()
	out, err := p.node.VSCtl(ctx, "--bare", "--columns=name", "find", "Interface", "external_ids:ovnt-container-id="+p.containerID)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("%s: OVS interfaces left: %q (%v)", p.name, out, err)
	}
	if out, err := p.node.VSCtl(ctx, "--bare", "--columns=name", "find", "Port", "name="+p.hostIf()); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("%s: OVS port left: %q (%v)", p.name, out, err)
	}
	if out, err := p.node.Exec(ctx, "ip", "link", "show", p.hostIf()); err == nil {
		t.Errorf("%s: host interface left: %s", p.name, out)
	}
	if out, err := harness.Exec(ctx, p.netns, "ip", "-o", "link", "show"); err != nil || strings.Contains(out, "eth0") {
		t.Errorf("%s: pod namespace still has eth0 (%v): %s", p.name, err, out)
	}
}

// portCount is how many OVS interfaces the pod's container has.
func portCount(ctx context.Context, t *testing.T, p *pod) int {
	t.Helper()
	out, err := p.node.VSCtl(ctx, "--bare", "--columns=name", "find", "Interface", "external_ids:ovnt-container-id="+p.containerID)
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(out))
}

// checkAttachment checks the details ADD's result does not show: MTU and checksum offload
// on both veth ends, and the port's external_ids that OVN, DEL and GC rely on.
func checkAttachment(ctx context.Context, t *testing.T, p *pod) {
	t.Helper()
	for _, end := range []struct{ netns, ifname string }{{p.node.Netns, p.hostIf()}, {p.netns, "eth0"}} {
		out, err := harness.Exec(ctx, end.netns, "ethtool", "-k", end.ifname)
		if err != nil || !strings.Contains(out, "tx-checksumming: off") {
			t.Errorf("%s: TX checksum offload of %s not off (%v):\n%s", p.name, end.ifname, err, out)
		}
		out, err = harness.Exec(ctx, end.netns, "ip", "-o", "link", "show", end.ifname)
		if err != nil || !strings.Contains(out, " mtu 1400 ") {
			t.Errorf("%s: %s MTU not 1400 (%v): %s", p.name, end.ifname, err, out)
		}
	}
	want := map[string]string{
		"iface-id": p.lsp(), "attached-mac": p.mac.String(), "iface-id-ver": p.uid,
		"ovnt-container-id": p.containerID, "ovnt-ifname": "eth0", "ovnt-sandbox": p.netnsPath(),
		"ovnt-pod": "default/" + p.name, "ovn-installed": "true",
	}
	for k, v := range want {
		out, err := p.node.VSCtl(ctx, "get", "Interface", p.hostIf(), "external_ids:"+k)
		if got := strings.Trim(strings.TrimSpace(out), `"`); err != nil || got != v {
			t.Errorf("%s: port %s external_ids:%s = %q (%v), want %q", p.name, p.hostIf(), k, got, err, v)
		}
	}
}
