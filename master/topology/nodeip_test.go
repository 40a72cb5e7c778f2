package topology

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// svcCfg is cfg with a Service range.
var svcCfg = Config{ClusterCIDR: cfg.ClusterCIDR, JoinSubnet: cfg.JoinSubnet,
	ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}}

// testNode is a Node created at second created, with the chassis annotation of nodeIP (none
// if "") and the kubelet's addresses internal (InternalIP) and external (ExternalIP).
func testNode(name string, created int, nodeIP string, internal, external []string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{},
		CreationTimestamp: metav1.NewTime(time.Unix(int64(1e9+created), 0))}}
	if nodeIP != "" {
		v, err := (contract.NodeChassisInfo{ChassisID: "ch-" + name, NodeIP: nodeIP, GatewayMAC: "0a:58:ac:12:00:01"}).Marshal()
		if err != nil {
			panic(err)
		}
		n.Annotations[contract.NodeChassisKey] = v
	}
	for _, a := range internal {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	for _, a := range external {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a})
	}
	return n
}

// Audit 2, finding 1: a node's published address is never a pod's, a Service's, a gateway
// router's or another node's, and agrees with the kubelet's InternalIP when there is one.
func TestCheckNodeIP(t *testing.T) {
	other := testNode("other", 1, "172.18.0.2/24", []string{"172.18.0.2"}, []string{"198.51.100.2"})
	claimer := testNode("claimer", 2, "172.18.0.7/24", nil, nil)                    // no InternalIP
	kubelet := testNode("kubelet", 3, "172.18.0.9/24", []string{"172.18.0.8"}, nil) // its claim is refused
	nodes := []*corev1.Node{other, claimer, kubelet}
	for _, tc := range []struct {
		ip       string
		internal []string
		refused  string // what the error says; "" for admitted
	}{
		{"172.18.0.1/24", nil, ""},
		{"172.18.0.1/24", []string{"172.18.0.1"}, ""},
		{"172.18.0.1/24", []string{"172.18.0.9", "172.18.0.1"}, ""},
		{"172.18.0.9/24", nil, ""},                                                  // claimed by a node whose kubelet says otherwise: not its
		{"172.18.0.7/24", []string{"172.18.0.7"}, ""},                               // its kubelet's word outweighs another's claim
		{"10.244.2.5/24", nil, "inside the cluster's own range 10.244.0.0/16"},      // another node's pod
		{"10.244.1.2/24", nil, "inside the cluster's own range 10.244.0.0/16"},      // a management port
		{"10.96.0.10/16", nil, "inside the cluster's own range 10.96.0.0/16"},       // a ClusterIP
		{"100.64.0.3/16", nil, "inside the cluster's own range 100.64.0.0/16"},      // a gateway router
		{"10.244.2.5/24", []string{"10.244.2.5"}, "inside the cluster's own range"}, // the kubelet's word is the node's too
		{"127.0.0.1/8", nil, "not an IPv4 unicast address"},
		{"169.254.100.1/16", nil, "not an IPv4 unicast address"},
		{"224.0.0.1/24", nil, "not an IPv4 unicast address"},
		{"172.18.0.0/24", nil, "not a host address"},
		{"172.18.0.255/24", nil, "not a host address"},
		{"172.18.0.1/24", []string{"172.18.0.9"}, "not one of the node's InternalIPs [172.18.0.9]"},
		{"172.18.0.2/24", nil, "node other's address"},
		{"198.51.100.2/24", nil, "node other's address"}, // its ExternalIP
		{"172.18.0.7/24", nil, "claimed by node claimer too"},
		{"172.18.0.8/24", nil, "node kubelet's address"},
	} {
		n := testNode("n", 5, tc.ip, tc.internal, nil)
		err := svcCfg.CheckNodeIP(n, netip.MustParsePrefix(tc.ip), append(nodes, n))
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s (InternalIPs %v) refused: %v", tc.ip, tc.internal, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s (InternalIPs %v): error %v, want one saying %q", tc.ip, tc.internal, err, tc.refused)
		}
		// An address the node had is not taken away by another node's claim; the rest holds.
		err = svcCfg.CheckKeptNodeIP(n, netip.MustParsePrefix(tc.ip), append(nodes, n))
		if keep := tc.refused == "" || strings.HasPrefix(tc.refused, "claimed"); keep != (err == nil) {
			t.Errorf("kept %s (InternalIPs %v): error %v", tc.ip, tc.internal, err)
		}
	}
}

// NodeIPs admits exactly the nodes CheckNodeIP admits, with their addresses.
func TestNodeIPsAgreesWithCheckNodeIP(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a", 1, "172.18.0.1/24", []string{"172.18.0.1"}, nil),
		testNode("b", 2, "172.18.0.1/24", nil, nil),                      // a's address
		testNode("c", 3, "172.18.0.3/24", []string{"172.18.0.4"}, nil),   // not its kubelet's
		testNode("d", 4, "172.18.0.5/24", nil, nil),                      // .5, claimed twice
		testNode("e", 5, "172.18.0.5/24", nil, nil),                      // the same
		testNode("f", 6, "10.244.3.7/24", nil, nil),                      // a pod's
		testNode("g", 7, "", []string{"172.18.0.9"}, nil),                // no annotation
		testNode("h", 8, "172.18.0.10/24", nil, []string{"172.18.0.11"}), // fine
		testNode("i", 9, "172.18.0.11/24", nil, nil),                     // h's ExternalIP
	}
	nodes[6].Annotations[contract.NodeChassisKey] = "{garbage"
	want := map[string]netip.Addr{}
	for _, n := range nodes {
		if p, ok := annotatedIP(n); ok && svcCfg.CheckNodeIP(n, p, nodes) == nil {
			want[n.Name] = p.Addr()
		}
	}
	wantNames := map[string]netip.Addr{"a": netip.MustParseAddr("172.18.0.1"), "h": netip.MustParseAddr("172.18.0.10")}
	if !reflect.DeepEqual(want, wantNames) {
		t.Fatalf("CheckNodeIP admits %v, want %v", want, wantNames)
	}
	if got := svcCfg.NodeIPs(nodes); !reflect.DeepEqual(got, want) {
		t.Errorf("NodeIPs = %v, want %v", got, want)
	}
}

// The rows never carry a node address inside the cluster's ranges, whoever builds the
// Gateway: NodeRows refuses it whole, and a good address gives exactly the management port
// and reroute rows it always did.
func TestNodeRowsRefuseReservedNodeIP(t *testing.T) {
	subnet := netip.MustParsePrefix("10.244.1.0/24")
	for _, ip := range []string{"10.244.2.5/24", "10.96.0.10/16", "100.64.0.3/16"} {
		gw := gateway(t, "")
		gw.NodeIP = netip.MustParsePrefix(ip)
		rows, err := NodeRows(svcCfg, Node{Name: "node1", Subnet: subnet, Gateway: gw})
		if err == nil || rows != nil {
			t.Errorf("nodeIP %s: %d rows, error %v", ip, len(rows), err)
		}
	}
	rows, err := NodeRows(svcCfg, Node{Name: "node1", Subnet: subnet, Gateway: gateway(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	got := byRole(t, rows)
	wantMgmt := nb.Row{ID: nb.NewID(nb.Node, "node1", nb.ManagementPort), Parent: nb.NewID(nb.Node, "node1", nb.NodeSwitch),
		Model: &nbdb.LogicalSwitchPort{Name: "k8s-node1", Addresses: []string{"0a:58:0a:f4:01:02 10.244.1.2"},
			PortSecurity: []string{"0a:58:0a:f4:01:02 10.244.1.2 172.18.0.1"}}}
	if !reflect.DeepEqual(got[nb.ManagementPort], wantMgmt) {
		t.Errorf("management port\n got %+v\nwant %+v", got[nb.ManagementPort], wantMgmt)
	}
	wantReroute := nb.Row{ID: nb.NewID(nb.Node, "node1", nb.NodeHostReroute), Parent: nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterRouter),
		Model: &nbdb.LogicalRouterPolicy{Priority: hostReroutePriority, Action: nbdb.LogicalRouterPolicyActionReroute,
			Match:    "ip4.dst == 172.18.0.1 && (ip4.src == 10.244.1.0/24 || tcp.dst >= 64512 || udp.dst >= 64512)",
			Nexthops: []string{"10.244.1.2"}}}
	if !reflect.DeepEqual(got[nb.NodeHostReroute], wantReroute) {
		t.Errorf("reroute\n got %+v\nwant %+v", got[nb.NodeHostReroute], wantReroute)
	}
}

// marked returns the models of rows as the NB cache holds them: with their owner marks.
func marked(t *testing.T, rows []nb.Row) []model.Model {
	t.Helper()
	var out []model.Model
	for _, r := range rows {
		v := reflect.ValueOf(r.Model).Elem().FieldByName("ExternalIDs")
		if !v.IsValid() {
			continue // no external_ids column (Chassis_Template_Var in this schema)
		}
		v.Set(reflect.ValueOf(r.ID.ExternalIDs()))
		out = append(out, r.Model)
	}
	return out
}

// RememberedGateway reads back the gateway NodeRows wrote, with or without a next hop, and
// nothing from rows without a gateway router.
func TestRememberedGateway(t *testing.T) {
	subnet := netip.MustParsePrefix("10.244.1.0/24")
	for _, nextHop := range []string{"172.18.0.254", ""} {
		gw := gateway(t, nextHop)
		rows, err := NodeRows(svcCfg, Node{Name: "node1", Subnet: subnet, Gateway: gw})
		if err != nil {
			t.Fatal(err)
		}
		if got := RememberedGateway(marked(t, rows)); !reflect.DeepEqual(got, gw) {
			t.Errorf("next hop %q: remembered %+v, want %+v", nextHop, got, gw)
		}
	}
	rows, err := NodeRows(svcCfg, Node{Name: "node1", Subnet: subnet})
	if err != nil {
		t.Fatal(err)
	}
	if got := RememberedGateway(marked(t, rows)); got != nil {
		t.Errorf("without a gateway router: remembered %+v", got)
	}
	if got := RememberedGateway(nil); got != nil {
		t.Errorf("from nothing: %+v", got)
	}
}
