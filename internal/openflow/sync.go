package openflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// flowMod is one change Sync makes: fmAdd (which also replaces a flow with the same table,
// priority and match) or fmDeleteStrict.
type flowMod struct {
	cmd  uint8
	flow Flow
}

func (m flowMod) op() string {
	if m.cmd == fmAdd {
		return "add"
	}
	return "delete"
}

// diff returns the flow-mods that turn have into want: adds for missing or changed flows
// first, then deletes, each in key order. Adds go first so that, where nothing is atomic
// (OpenFlow 1.3), traffic never meets a table with the old flow gone and the new one not yet
// there.
func diff(want, have []Flow) []flowMod {
	haveBy := make(map[string]*Flow, len(have))
	for i := range have {
		haveBy[have[i].key()] = &have[i]
	}
	var adds, dels []flowMod
	for _, w := range want {
		k := w.key()
		h, ok := haveBy[k]
		if !ok || h.actionsString() != w.actionsString() {
			adds = append(adds, flowMod{fmAdd, w})
		}
		delete(haveBy, k)
	}
	for _, h := range haveBy {
		dels = append(dels, flowMod{fmDeleteStrict, *h})
	}
	byKey := func(a, b flowMod) int { return strings.Compare(a.flow.key(), b.flow.key()) }
	slices.SortFunc(adds, byKey)
	slices.SortFunc(dels, byKey)
	return append(adds, dels...)
}

// apply sends mods: in one atomic bundle on OpenFlow 1.4, else in order followed by a
// barrier. Every flow-mod has its own xid, so each OFPT_ERROR names its flow.
func (c *conn) apply(ctx context.Context, mods []flowMod) error {
	xids := make([]uint32, len(mods))
	var buf []byte
	var err error
	bundle := c.version >= OpenFlow14
	id := c.bundleID.Add(1)
	openXID, barrierXID, commitXID := c.nextXID(), c.nextXID(), c.nextXID()
	if bundle {
		buf, err = appendBundleControl(buf, c.version, openXID, id, bundleOpenReq)
		if err != nil {
			return err
		}
	}
	for i, m := range mods {
		xids[i] = c.nextXID()
		if bundle {
			buf, err = appendBundleAdd(buf, c.version, xids[i], id, m)
		} else {
			buf, err = appendFlowMod(buf, c.version, xids[i], m.cmd, &m.flow)
		}
		if err != nil {
			return fmt.Errorf("openflow: %s %s: %w", m.op(), m.flow.String(), err)
		}
	}
	buf = appendHeader(buf, c.version, typeBarrierReq, barrierXID)
	buf, _ = finishMsg(buf, len(buf)-headerLen)

	all := append([]uint32{openXID, barrierXID, commitXID}, xids...)
	cl := c.register(all...)
	defer c.unregister(all...)
	if err := c.send(ctx, buf); err != nil {
		return err
	}
	// OVS checks each flow-mod when it is added to a bundle and, on an error, leaves it out
	// and keeps the bundle open: a commit would then install the rest. So wait for the
	// barrier, which OVS answers after every earlier message, and commit only if nothing
	// failed.
	errs, err := c.collect(ctx, cl, barrierXID, typeBarrierReply, mods, xids)
	if err != nil {
		return err
	}
	if !bundle {
		return errors.Join(errs...)
	}
	if len(errs) > 0 {
		// Nothing of the bundle has been applied; the discard reply is not waited for.
		discard, err := appendBundleControl(nil, c.version, c.nextXID(), id, bundleDiscardReq)
		if err == nil {
			c.send(ctx, discard)
		}
		return errors.Join(errs...)
	}
	commit, err := appendBundleControl(nil, c.version, commitXID, id, bundleCommitReq)
	if err != nil {
		return err
	}
	if err := c.send(ctx, commit); err != nil {
		return err
	}
	// A flow-mod can also fail at commit (OFPFMFC_TABLE_FULL, say): OVS then sends its error
	// with the flow-mod's xid, rolls the whole bundle back, and fails the commit.
	errs, err = c.collect(ctx, cl, commitXID, typeBundleControl, mods, xids)
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// collect reads the call's messages until the reply of type endType to endXID, turning
// errors for flow-mods into FlowErrors. An error reply to endXID itself (or to the bundle
// open) is returned after them.
func (c *conn) collect(ctx context.Context, cl *call, endXID uint32, endType uint8, mods []flowMod, xids []uint32) ([]error, error) {
	var errs []error
	for {
		m, err := c.next(ctx, cl)
		if err != nil {
			return nil, err
		}
		if m.typ == typeError {
			e, err := parseError(m.body)
			if err != nil {
				return nil, err
			}
			if i := slices.Index(xids, m.xid); i >= 0 {
				errs = append(errs, &FlowError{Op: mods[i].op(), Cookie: mods[i].flow.Cookie, Flow: mods[i].flow.String(), Err: e})
				continue
			}
			errs = append(errs, fmt.Errorf("openflow: bundle: %w", e))
			if m.xid == endXID {
				return errs, nil
			}
			continue
		}
		if m.xid == endXID && m.typ == endType {
			return errs, nil
		}
	}
}

// appendBundleControl appends an OFPT_BUNDLE_CONTROL (OpenFlow 1.4) with the ATOMIC and
// ORDERED flags; OVS insists that adds and the commit repeat the flags of the open.
func appendBundleControl(b []byte, v Version, xid, id uint32, typ uint16) ([]byte, error) {
	start := len(b)
	b = appendHeader(b, v, typeBundleControl, xid)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, bundleAtomic|bundleOrdered)
	return finishMsg(b, start)
}

// appendBundleAdd appends an OFPT_BUNDLE_ADD_MESSAGE holding a flow-mod. The inner message
// must carry the same xid as the outer one (OVS: OFPBFC_MSG_BAD_XID otherwise), which is
// also what OVS puts on an error about it.
func appendBundleAdd(b []byte, v Version, xid, id uint32, m flowMod) ([]byte, error) {
	start := len(b)
	b = appendHeader(b, v, typeBundleAdd, xid)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint16(b, 0) // pad
	b = binary.BigEndian.AppendUint16(b, bundleAtomic|bundleOrdered)
	b, err := appendFlowMod(b, v, xid, m.cmd, &m.flow)
	if err != nil {
		return nil, err
	}
	return finishMsg(b, start)
}
