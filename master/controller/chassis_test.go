//go:build linux

package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// reasonChassisInUse is ReasonChassisInUse, spelt out so that this test also builds against
// a master that does not check chassis claims (and fails there).
const reasonChassisInUse = "NodeChassisInUse"

func (e *env) setChassis(node string, info *contract.NodeChassisInfo) {
	e.t.Helper()
	v, err := info.Marshal()
	if err != nil {
		e.t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.NodeChassisKey: v}}})
	if _, err := e.kube.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) grChassis(node string) string {
	e.t.Helper()
	out, err := e.central.NBCtl(e.ctx, "--if-exists", "get", "logical_router", contract.GatewayRouter(node), "options:chassis")
	if err != nil {
		return err.Error()
	}
	return strings.Trim(strings.TrimSpace(out), `"`)
}

func (e *env) waitGRChassis(node, want string) {
	e.t.Helper()
	e.eventually(contract.GatewayRouter(node)+" on "+want, func() (bool, string) {
		got := e.grChassis(node)
		return got == want, got
	})
}

// H4 (security audit): a node agent that claims another node's chassis does not move that
// node's gateway router, before or after a master restart; a new chassis of its own moves
// its own router.
func TestChassisClaimedByAnotherNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newEnv(t, ctx)
	cfg := testConfig("10.244.0.0/16")
	m := e.startMaster(cfg)
	e.createNode("node1", chassisOf(1))
	e.createNode("node2", chassisOf(2))
	e.waitGRChassis("node1", "chassis-1")
	e.waitGRChassis("node2", "chassis-2")

	hijack := *chassisOf(2)
	hijack.ChassisID = "chassis-1"
	e.setChassis("node2", &hijack)
	e.waitEvent("node2", reasonChassisInUse)
	for node, want := range map[string]string{"node1": "chassis-1", "node2": "chassis-2"} {
		if got := e.grChassis(node); got != want {
			t.Errorf("after node2 claimed chassis-1: %s is on %q, want %s", contract.GatewayRouter(node), got, want)
		}
	}

	// A restarted master knows the bindings from the NB, not from the annotations.
	m.stop()
	e.startMaster(cfg)
	e.nbctl("--wait=sb", "sync")
	e.createNode("node3", chassisOf(3)) // a sync the new master has done after its start-up
	e.waitGRChassis("node3", "chassis-3")
	for node, want := range map[string]string{"node1": "chassis-1", "node2": "chassis-2"} {
		if got := e.grChassis(node); got != want {
			t.Errorf("after a master restart: %s is on %q, want %s", contract.GatewayRouter(node), got, want)
		}
	}

	// A chassis nobody else has: the node re-registered, its router follows.
	moved := *chassisOf(2)
	moved.ChassisID = "chassis-9"
	e.setChassis("node2", &moved)
	e.waitGRChassis("node2", "chassis-9")
	if got := e.grChassis("node1"); got != "chassis-1" {
		t.Errorf("GR_node1 is on %q, want chassis-1", got)
	}
}
