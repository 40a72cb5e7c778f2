package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// M6: libovsdb drops cache events when its buffer of 65,536 is full, and a dropped event
// can be the deletion of one of the master's rows. Here the master's event processor is
// held while another writer inserts 70,000 rows, then deletes the Service's load balancer:
// that deletion is dropped. The master must notice the drop and resync everything, which
// puts the load balancer back (there is no periodic resync in this test).
//
// Of the integration tier: 66,000 rows through ovsdb-server and the master's cache take
// from 20 s on an idle machine to three minutes on a loaded one.
func TestUnitEventOverflowResyncs(t *testing.T) {
	testenv.Integration(t)
	e := startUnit(t, testConfig("10.244.0.0/16"), externalIPService())
	e.waitVIPs("10.96.0.10:22")
	// No inactivity probe: on a loaded machine the echo can go unanswered while the server
	// sends the burst, and a reconnection with the event processor held does not finish.
	e.nbProbe = -1
	e.restartMaster()
	e.waitVIPs("10.96.0.10:22")
	lb := waitRow(e, "the Service's load balancer", func(l *nbdb.LoadBalancer) bool { return l.Name == "Service_tenant/hijack_TCP_cluster" })

	// Hold the master's event processor: handlers run one event at a time, in order.
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	e.masterNB.Cache().AddEventHandler(&cache.EventHandlerFuncs{AddFunc: func(string, model.Model) {
		select {
		case held <- struct{}{}:
			<-release
		default:
		}
	}})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// The writer monitors nothing of the burst, and sends no inactivity probe: libovsdb's
	// Transact hangs for good when its probe gave up on a server busy with the burst.
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	writer, err := ovsdb.New(e.ctx, dbModel, ovsdb.Config{Remotes: e.nbSrv.Remote, InactivityProbe: -1,
		Tables: []ovsdb.Table{{Model: &nbdb.NBGlobal{}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	const burst = 66000 // more than libovsdb's buffer of 65,536
	ops := make([]libovsdb.Operation, 0, burst)
	for i := range burst {
		op, err := writer.Create(&nbdb.AddressSet{Name: fmt.Sprintf("burst%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op...)
	}
	if _, err := ovsdb.Transact(e.ctx, writer, ops...); err != nil {
		t.Fatal(err)
	}
	<-held
	del, err := writer.Where(&nbdb.LoadBalancer{UUID: lb.UUID}).Delete()
	if err != nil {
		t.Fatal(err)
	}
	// The load balancer is also referenced by the cluster's switches and routers (none
	// here without nodes); a strong reference would refuse the deletion.
	if _, err := ovsdb.Transact(e.ctx, writer, del...); err != nil {
		t.Fatal(err)
	}
	waitNoRow(e, "the deleted load balancer in the reader's cache", func(l *nbdb.LoadBalancer) bool { return l.UUID == lb.UUID })
	// The master's cache takes the updates while its handlers are held (it queues their
	// events): wait until it has the deletion, or the release could come first.
	poll.Eventually(t, e.ctx, "the deletion in the master's cache", time.Minute, 20*time.Millisecond, func() (bool, error) {
		err := e.masterNB.Get(e.ctx, &nbdb.LoadBalancer{UUID: lb.UUID})
		return errors.Is(err, client.ErrNotFound), nil
	})
	close(release)
	released = true

	// The master works through the 65,536 buffered events meanwhile, which takes a while
	// on a loaded machine.
	poll.Eventually(t, e.ctx, "a resync after the drops, and the load balancer put back", 2*time.Minute, 50*time.Millisecond, func() (bool, error) {
		return e.ctrl.overflowResyncs.Load() > 0 && e.vipsOf("hijack") == 1, nil
	})
}
