package services

import (
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/node/conntrack"
)

// fakeConntrack keeps the table it was last given.
type fakeConntrack struct {
	mu sync.Mutex
	t  conntrack.Table
}

func (f *fakeConntrack) Set(t conntrack.Table) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = t
}

func (f *fakeConntrack) backends(fe conntrack.Frontend) ([]netip.AddrPort, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tg, ok := f.t[fe]
	return tg.Backends, ok
}

// TestControllerFeedsConntrack: the conntrack cleaner is given the UDP frontends with the
// current backends, and follows an endpoint being replaced.
func TestControllerFeedsConntrack(t *testing.T) {
	client := fake.NewClientset()
	ct := &fakeConntrack{}
	c := New(Config{NodeName: "node1", NodeIP: netip.MustParseAddr("127.0.0.1"), Conntrack: ct}, client, logr.Discard())
	runController(t, client, c)
	ctx := t.Context()

	if _, err := client.CoreV1().Services("ns").Create(ctx, svc("dns", corev1.ServiceTypeClusterIP, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vip := conntrack.Frontend{Proto: 17, Addr: netip.MustParseAddrPort("10.96.0.10:53")}
	eventually(t, "the UDP frontend without backends", func() bool {
		b, ok := ct.backends(vip)
		return ok && len(b) == 0
	})
	if _, ok := ct.backends(conntrack.Frontend{Proto: 6, Addr: netip.MustParseAddrPort("10.96.0.10:80")}); ok {
		t.Error("a TCP frontend is in the conntrack table")
	}
	sl, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice("dns", "dns-1", ep{addr: "10.244.1.5", node: "node1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first backend", func() bool {
		b, _ := ct.backends(vip)
		return slices.Equal(b, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.5:5353")})
	})
	sl.Endpoints[0].Addresses = []string{"10.244.1.9"}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replaced backend", func() bool {
		b, _ := ct.backends(vip)
		return slices.Equal(b, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.9:5353")})
	})
	// A host-network endpoint on this node: its load balancers write it as the management
	// address, whose entries must not look stale.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Annotations: map[string]string{contract.NodeSubnetKey: "10.244.1.0/24"}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{"127.0.0.1"}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the host-network backend at the node IP and the management address", func() bool {
		b, _ := ct.backends(vip)
		return slices.Equal(b, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.2:5353"), netip.MustParseAddrPort("127.0.0.1:5353")})
	})
}
