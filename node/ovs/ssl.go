package ovs

import (
	"context"
	"errors"
	"fmt"

	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// SSL names the PEM files of the host's TLS identity: ovn-controller reads them from the
// Open_vSwitch database's SSL row when it was started without -p, -c and -C, and uses them for
// its ssl: SB remotes. The row is the host's one TLS configuration, the one `ovs-vsctl
// set-ssl` writes: ovs-vswitchd uses it for ssl: managers and controllers too, and Debian's
// ovsdb-server for its pssl: remotes.
type SSL struct {
	PrivateKey  string
	Certificate string
	CACert      string
}

// EnsureSSL makes the Open_vSwitch row's ssl column point at a row holding want's three
// paths. Idempotent: when they are already there it writes nothing; an existing row with
// other paths is updated in place, so its other columns (bootstrap_ca_cert, external_ids)
// are kept.
func (s *Switch) EnsureSSL(ctx context.Context, want SSL) error {
	if want.PrivateKey == "" || want.Certificate == "" || want.CACert == "" {
		return errors.New("ssl: the private key, certificate and CA certificate are all needed")
	}
	root, err := s.root(ctx)
	if err != nil {
		return err
	}
	row := &vswitchd.SSL{PrivateKey: want.PrivateKey, Certificate: want.Certificate, CaCert: want.CACert}
	cur := s.ssl(ctx, root)
	done := func() bool {
		r, err := s.root(ctx)
		got := (*vswitchd.SSL)(nil)
		if err == nil {
			got = s.ssl(ctx, r)
		}
		return got != nil && got.PrivateKey == want.PrivateKey && got.Certificate == want.Certificate && got.CaCert == want.CACert
	}
	if done() {
		return nil
	}
	var ops []libovsdb.Operation
	if cur != nil {
		row.UUID = cur.UUID
		ops, err = s.c.Where(row).Update(row, &row.PrivateKey, &row.Certificate, &row.CaCert)
	} else {
		// SSL is not a root table: the new row lives as long as the Open_vSwitch row
		// refers to it, so both go in one transaction.
		row.UUID = "new_ssl"
		ops, err = s.c.Create(row)
		if err == nil {
			ref := row.UUID
			var set []libovsdb.Operation
			ovs := &vswitchd.OpenvSwitch{UUID: root.UUID, SSL: &ref}
			set, err = s.c.Where(ovs).Update(ovs, &ovs.SSL)
			ops = append(ops, set...)
		}
	}
	if err != nil {
		return fmt.Errorf("ssl: %w", err)
	}
	return s.transact(ctx, "writing the SSL row", done, ops...)
}

// ssl returns the cached SSL row root refers to, or nil.
func (s *Switch) ssl(ctx context.Context, root *vswitchd.OpenvSwitch) *vswitchd.SSL {
	if root.SSL == nil {
		return nil
	}
	row := &vswitchd.SSL{UUID: *root.SSL}
	if err := s.c.Get(ctx, row); err != nil {
		return nil
	}
	return row
}
