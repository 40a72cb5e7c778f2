package svcmodel_test

import (
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// svcmodel stays free of the OpenFlow and OVSDB packages; this pins its mappings to theirs.
func TestProtoMappings(t *testing.T) {
	for _, tc := range []struct {
		p       svcmodel.Proto
		ipProto uint8
		nb      string
	}{
		{svcmodel.TCP, openflow.IPProtoTCP, nbdb.LoadBalancerProtocolTCP},
		{svcmodel.UDP, openflow.IPProtoUDP, nbdb.LoadBalancerProtocolUDP},
		{svcmodel.SCTP, openflow.IPProtoSCTP, nbdb.LoadBalancerProtocolSCTP},
	} {
		if tc.p.IPProto() != tc.ipProto || tc.p.NB() != tc.nb {
			t.Errorf("%s: IPProto %d NB %q, want %d %q", tc.p, tc.p.IPProto(), tc.p.NB(), tc.ipProto, tc.nb)
		}
	}
}
