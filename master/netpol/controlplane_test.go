package netpol

import (
	"net/netip"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

func TestClusterRows(t *testing.T) {
	if rows, err := ClusterRows(ControlPlane{}, []string{"u1"}); err != nil || len(rows) != 0 {
		t.Errorf("no control plane address: rows %v, error %v; want none", rows, err)
	}
	cp := ControlPlane{Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.20/32"), netip.MustParsePrefix("198.51.100.0/28")}}
	rows, err := ClusterRows(cp, []string{"u2", "u1"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v, error %v", rows, err)
	}
	pg, ok := rows[0].Model.(*nbdb.PortGroup)
	if !ok || pg.Name != NodeSwitchesGroup || len(pg.Ports) != 2 || pg.Ports[0] != "u1" || rows[0].ID.Role != nb.NodeSwitches {
		t.Errorf("port group %+v", rows[0])
	}
	acl, ok := rows[1].Model.(*nbdb.ACL)
	want := "ip4.dst == {192.0.2.20/32, 198.51.100.0/28} && tcp.dst == {6641, 6642, 6643, 6644}"
	if !ok || acl.Match != want || acl.Action != nbdb.ACLActionDrop || acl.Direction != nbdb.ACLDirectionFromLport ||
		acl.Priority >= PriorityAllow || acl.Priority < 1 || acl.Options["apply-after-lb"] != "true" || rows[1].Parent != rows[0].ID {
		t.Errorf("ACL %+v (parent %v), want match %q, a from-lport drop after the load balancers below the policies' allows", acl, rows[1].Parent, want)
	}
	cp.Ports = []uint16{7000}
	if rows, _ := ClusterRows(cp, nil); rows[1].Model.(*nbdb.ACL).Match != "ip4.dst == {192.0.2.20/32, 198.51.100.0/28} && tcp.dst == {7000}" {
		t.Errorf("ports: %s", rows[1].Model.(*nbdb.ACL).Match)
	}
	cp.MgmtAddr, cp.MgmtMask = netip.MustParseAddr("10.244.0.2"), netip.MustParseAddr("255.255.0.255")
	if rows, _ := ClusterRows(cp, nil); rows[1].Model.(*nbdb.ACL).Match != "(ip4.dst == {192.0.2.20/32, 198.51.100.0/28} || ip4.dst == 10.244.0.2/255.255.0.255) && tcp.dst == {7000}" {
		t.Errorf("management addresses: %s", rows[1].Model.(*nbdb.ACL).Match)
	}
	if _, err := ClusterRows(ControlPlane{Addresses: []netip.Prefix{netip.MustParsePrefix("2001:db8::1/128")}}, nil); err == nil {
		t.Error("an IPv6 address was accepted")
	}
}
