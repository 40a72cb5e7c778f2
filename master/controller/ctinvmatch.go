package controller

import (
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// ctInvMatchOption is the NB_Global option that, set to "false", makes ovn-northd leave
// ct.inv out of every logical flow: packets conntrack marks invalid are then delivered
// instead of dropped. Every load-balanced TCP connection relies on that drop (with Linux's
// conntrack an invalid reply keeps the backend's address, and the client resets the
// connection: docs/security.md, "Packets conntrack marks invalid"). The master does not own
// NB_Global, so it only warns.
const ctInvMatchOption = "use_ct_inv_match"

// ctInvMatchTurnedOff reports whether cur, an NB_Global row, has the invalid-packet drop
// turned off and old (nil for a new row) did not: the moment to warn, once.
func ctInvMatchTurnedOff(old, cur model.Model) bool {
	off := func(m model.Model) bool {
		g, ok := m.(*nbdb.NBGlobal)
		return ok && g.Options[ctInvMatchOption] == "false"
	}
	return off(cur) && !off(old)
}

// globalChanged logs when NB_Global turns OVN's drop of invalid packets off (old: the row
// before, nil when there was none): the cluster's load balancers rely on it.
func (r clusterReconciler) globalChanged(old, cur model.Model) {
	if ctInvMatchTurnedOff(old, cur) {
		r.log.Info("Warning: NB_Global options:"+ctInvMatchOption+"=false: OVN no longer drops packets conntrack marks invalid; "+
			"with the kernel datapath a backend's out-of-window TCP segment then reaches the client without its reverse NAT "+
			"and the client resets the connection (docs/security.md)", "option", ctInvMatchOption)
	}
}
