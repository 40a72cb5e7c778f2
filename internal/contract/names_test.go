package contract

import (
	"net/netip"
	"strings"
	"testing"
)

// TestNames pins every name: each is bound by name on the other side, or by operators'
// habits, so a change here is a change of the data path (or of what operators type).
func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{ClusterRouter, "ovn_cluster_router"},
		{JoinSwitch, "join"},
		{ClusterRouterJoinPort, "rtoj-ovn_cluster_router"},
		{JoinSwitchClusterPort, "jtor-ovn_cluster_router"},
		{NodeSwitch("node1"), "node1"},
		{NodeRouterPort("node1"), "rtos-node1"},
		{NodeSwitchRouterPort("node1"), "stor-node1"},
		{ManagementPort("node1"), "k8s-node1"},
		{GatewayRouter("node1"), "GR_node1"},
		{GatewayJoinPort("node1"), "rtoj-GR_node1"},
		{JoinSwitchGatewayPort("node1"), "jtor-GR_node1"},
		{GatewayExternalPort("node1"), "rtoe-GR_node1"},
		{ExternalSwitchGatewayPort("node1"), "etor-GR_node1"},
		{ExternalSwitch("node1"), "ext_node1"},
		{LocalnetPort("node1"), "breth0_node1"},
		{PodPort("ns1", "web-0"), "ns1_web-0"},
		{PhysicalNetwork, "physnet"},
		{NodePortGatewayIP.String(), "169.254.100.1"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestMgmtIfName: the interface name is the logical port's, cut to what Linux allows; the
// iface-id that binds them keeps the whole name.
func TestMgmtIfName(t *testing.T) {
	for node, want := range map[string]string{
		"node1":                          "k8s-node1",
		"ip-10-0-0-1.eu-west-1.internal": "k8s-ip-10-0-0-1",
		"abcdefghijk":                    "k8s-abcdefghijk", // exactly 15
	} {
		if got := MgmtIfName(node); got != want {
			t.Errorf("MgmtIfName(%q) = %q, want %q", node, got, want)
		}
		if !strings.HasPrefix(ManagementPort(node), MgmtIfName(node)) {
			t.Errorf("MgmtIfName(%q) is not a prefix of ManagementPort", node)
		}
	}
}

func TestSubnetAddresses(t *testing.T) {
	for _, tc := range []struct {
		subnet             string
		router, management string
	}{
		{"10.244.1.0/24", "10.244.1.1", "10.244.1.2"},
		{"10.244.0.0/24", "10.244.0.1", "10.244.0.2"},
		{"10.128.2.0/23", "10.128.2.1", "10.128.2.2"},
		{"10.244.255.248/29", "10.244.255.249", "10.244.255.250"},
	} {
		s := netip.MustParsePrefix(tc.subnet)
		if got := RouterIP(s).String(); got != tc.router {
			t.Errorf("RouterIP(%s) = %s, want %s", s, got, tc.router)
		}
		if got := ManagementIP(s).String(); got != tc.management {
			t.Errorf("ManagementIP(%s) = %s, want %s", s, got, tc.management)
		}
	}
	if got := MACFromIP(netip.MustParseAddr("10.244.1.2")).String(); got != "0a:58:0a:f4:01:02" {
		t.Errorf("MACFromIP(10.244.1.2) = %s", got)
	}
}

// TestManagementAddresses: the one masked address matches the management address of every
// node subnet of the cluster, and nothing else of a node subnet (the router address, a pod).
func TestManagementAddresses(t *testing.T) {
	for _, tc := range []struct {
		cluster    string
		nodeBits   int
		addr, mask string
	}{
		{"10.244.0.0/16", 24, "10.244.0.2", "255.255.0.255"},
		{"10.128.0.0/14", 23, "10.128.0.2", "255.252.1.255"},
	} {
		cluster := netip.MustParsePrefix(tc.cluster)
		addr, mask := ManagementAddresses(cluster, tc.nodeBits)
		if addr.String() != tc.addr || mask.String() != tc.mask {
			t.Errorf("ManagementAddresses(%s, %d) = %s/%s, want %s/%s", cluster, tc.nodeBits, addr, mask, tc.addr, tc.mask)
		}
		matches := func(a netip.Addr) bool {
			x, m, v := a.As4(), mask.As4(), addr.As4()
			for i := range x {
				if x[i]&m[i] != v[i] {
					return false
				}
			}
			return true
		}
		// Every node subnet, walked by its first address.
		for s := netip.PrefixFrom(cluster.Addr(), tc.nodeBits); cluster.Contains(s.Addr()); s = netip.PrefixFrom(nth(s, 1<<(32-tc.nodeBits)), tc.nodeBits) {
			if !matches(ManagementIP(s)) || matches(RouterIP(s)) || matches(nth(s, 3)) {
				t.Fatalf("%s: management %s matched %v, router %s matched %v", s, ManagementIP(s), matches(ManagementIP(s)), RouterIP(s), matches(RouterIP(s)))
			}
		}
		if outside := nth(netip.PrefixFrom(cluster.Addr(), cluster.Bits()), 1<<(32-cluster.Bits())+2); matches(outside) {
			t.Errorf("%s matched, outside %s", outside, cluster)
		}
	}
}

func TestParseClusterNetworks(t *testing.T) {
	n, err := ParseClusterNetworks("10.244.0.0/16, 10.245.0.0/16,", "10.96.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if len(n.ClusterCIDRs) != 2 || n.ClusterCIDRs[1].String() != "10.245.0.0/16" || len(n.ServiceCIDRs) != 1 {
		t.Errorf("got %+v", n)
	}
	if n, err := ParseClusterNetworks("10.244.0.0/16", ""); err != nil || n.ServiceCIDRs != nil {
		t.Errorf("no service range: %+v, %v", n, err)
	}
	for _, tc := range []struct {
		cluster, service string
		want             string
	}{
		{"", "10.96.0.0/16", "--cluster-cidr is empty"},
		{"10.244.0.0/33", "", "--cluster-cidr"},
		{"10.244.1.0/16", "", "host bits set (did you mean 10.244.0.0/16?)"},
		{"10.244.0.0/16", "10.96.0.1/16", "--service-cidr"},
		{"fd00::/48", "", "only IPv4"},
		{"10.244.0.0/16", "10.244.128.0/20", "--cluster-cidr 10.244.0.0/16 overlaps --service-cidr 10.244.128.0/20"},
		{"10.244.0.0/16,10.244.0.0/17", "", "overlaps"},
	} {
		if _, err := ParseClusterNetworks(tc.cluster, tc.service); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q, %q: got %v, want an error with %q", tc.cluster, tc.service, err, tc.want)
		}
	}
}
