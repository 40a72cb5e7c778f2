//go:build linux

package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// TestGeneratedModelsWriteToRealNB writes a switch and a port through internal/ovsdb with the
// generated nbdb models into the run's NB, and checks what ovn-nbctl shows and what ovn-northd
// made of it in the SB.
func TestGeneratedModelsWriteToRealNB(t *testing.T) {
	Require(t, "ovsdb-server", "ovn-northd", "ovn-nbctl", "ovn-sbctl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := NewTestRun(t)
	central, err := r.StartOVNCentral(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ovsdb.New(ctx, dbModel, ovsdb.Config{
		Remotes: central.NBRemote,
		Tables:  []ovsdb.Table{{Model: &nbdb.LogicalSwitch{}}, {Model: &nbdb.LogicalSwitchPort{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	port := &nbdb.LogicalSwitchPort{
		UUID:        "portrow",
		Name:        "default_web-0",
		Addresses:   []string{"0a:58:0a:f4:01:05 10.244.1.5"},
		ExternalIDs: map[string]string{"k8s.ovn-transparent.io/owner": "Pod/default/web-0"},
	}
	sw := &nbdb.LogicalSwitch{
		UUID:        "switchrow",
		Name:        "node1",
		Ports:       []string{port.UUID},
		OtherConfig: map[string]string{"subnet": "10.244.1.0/24"},
		ExternalIDs: map[string]string{"k8s.ovn-transparent.io/owner": "Node/node1"},
	}
	ops, err := c.Create(port, sw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(ctx, c, ops...); err != nil {
		t.Fatal(err)
	}

	// The client's own cache has the rows (the monitor echoed them back).
	poll.Eventually(t, ctx, "the switch in the client cache", 0, 20*time.Millisecond, func() (bool, error) {
		// Logical_Switch has no index on name in the schema, so look it up by predicate.
		var got []nbdb.LogicalSwitch
		err := c.WhereCache(func(ls *nbdb.LogicalSwitch) bool { return ls.Name == "node1" }).List(ctx, &got)
		return err == nil && len(got) == 1 && len(got[0].Ports) == 1, err
	})

	show, err := central.NBCtl(ctx, "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"switch", "(node1)", "port default_web-0", `addresses: ["0a:58:0a:f4:01:05 10.244.1.5"]`} {
		if !strings.Contains(show, want) {
			t.Errorf("ovn-nbctl show lacks %q:\n%s", want, show)
		}
	}
	ext, err := central.NBCtl(ctx, "get", "Logical_Switch", "node1", "external_ids:k8s.ovn-transparent.io/owner")
	if err != nil || strings.TrimSpace(ext) != `"Node/node1"` {
		t.Errorf("owner in external_ids: %q, %v", ext, err)
	}

	// ovn-northd turned the switch into a datapath with a port binding.
	if _, err := central.NBCtl(ctx, "--wait=sb", "--timeout=20", "sync"); err != nil {
		t.Fatal(err)
	}
	pb, err := central.SBCtl(ctx, "--columns=logical_port", "--bare", "find", "Port_Binding", "logical_port=default_web-0")
	if err != nil || strings.TrimSpace(pb) != "default_web-0" {
		t.Errorf("SB Port_Binding for the port: %q, %v", pb, err)
	}

	// Port names are a schema index: a second port of the same name is refused, and the
	// error names the row.
	// (An unreferenced port would be garbage-collected before the index is checked, so the
	// duplicate hangs off a second switch.)
	dup := &nbdb.LogicalSwitchPort{UUID: "dup", Name: "default_web-0"}
	sw2 := &nbdb.LogicalSwitch{UUID: "sw2", Name: "node2", Ports: []string{dup.UUID}}
	ops, err = c.Create(dup, sw2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.Transact(ctx, c, ops...); err == nil || !strings.Contains(err.Error(), "default_web-0") {
		t.Errorf("duplicate port: got %v, want an error naming default_web-0", err)
	}
}
