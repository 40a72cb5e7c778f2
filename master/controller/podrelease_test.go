package controller

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/ovn-org/libovsdb/client"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/kubetest"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// M2: a departed pod's address goes back to the pool only once no row names it any more. A
// peer address set that still held it when a new pod got it would let the new pod pass the
// old pod's policies. The test drives one sync of the departed pod's key by hand, with the
// peer's address set still holding the address (its own key not synced yet, as under a
// backlog): when the sync returns and the address is free, no address set may hold it.
func TestPodAddressFreedOnlyAfterSetsLetGo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := ovsdbtest.Start(t, ovsdbtest.NB)
	connect := func() client.Client {
		c, err := nb.Connect(ctx, ovsdb.Config{Remotes: srv.Remote})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	reader, writer := connect(), connect()
	departed, other := netip.MustParseAddr("10.244.0.3"), "10.244.0.9"
	set := &nbdb.AddressSet{UUID: "set", Name: "np_peer_0123456789abcdef", Addresses: []string{departed.String(), other},
		ExternalIDs: nb.NewID(nb.NetworkPolicyPeer, "0123456789abcdef", nb.PeerAddresses).ExternalIDs()}
	ops, err := reader.Create(set)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(ctx, reader, ops...); err != nil {
		t.Fatal(err)
	}
	c, err := New(testConfig("10.244.0.0/16"), fake.NewClientset(subnetNode("node1", node1Subnet)), writer, &kubetest.Recorder{}, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	c.factory.Start(ctx.Done())
	defer func() { cancel(); c.factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if err := c.ipam.ReserveNodeSubnet("node1", netip.MustParsePrefix(node1Subnet)); err != nil {
		t.Fatal(err)
	}
	// ns/gone was deleted while its address was in the set; its port is already gone.
	if err := c.ipam.ReservePodIP("node1", "ns/gone", departed); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, "the master's NB cache has the address set", func() (bool, string) {
		return holding(ctx, writer, departed.String()) > 0, ""
	})

	if err := c.sync(ctx, nb.Key{Kind: nb.Pod, Name: "ns/gone"}); err != nil {
		t.Fatal(err)
	}
	if _, _, held := c.ipam.PodIP("ns/gone"); held {
		t.Fatal("the departed pod's address is still held after its sync")
	}
	if n := holding(ctx, writer, departed.String()); n > 0 {
		t.Errorf("%s is free for the next pod, yet %d address set(s) still hold it", departed, n)
	}
	if got, _ := c.ipam.AllocatePodIP("node1", "ns/new"); got == departed && holding(ctx, writer, departed.String()) > 0 {
		t.Errorf("new pod got %s while an address set held it for the departed pod", got)
	}
}

// holding counts the address sets in c's cache that hold addr.
func holding(ctx context.Context, c client.Client, addr string) int {
	var sets []*nbdb.AddressSet
	if err := c.WhereCache(func(s *nbdb.AddressSet) bool { return slices.Contains(s.Addresses, addr) }).List(ctx, &sets); err != nil {
		return -1
	}
	return len(sets)
}
