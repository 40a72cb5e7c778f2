package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// clusterReconciler converges the one Cluster key: the shared topology (cluster router, join
// switch), the load balancer group every node switch and gateway router references, and the
// ACL log meter. Node syncs enqueue it when a node's switch or gateway router appears.
type clusterReconciler struct{ *caches }

func (clusterReconciler) kind() nb.Kind { return nb.Cluster }

// batchSize: the Cluster is batched first, alone: every cluster load balancer hangs in its
// load balancer group.
func (clusterReconciler) batchSize() int { return 1 }

func (clusterReconciler) keys() ([]string, error) { return []string{nb.ClusterName}, nil }

func (r clusterReconciler) desired(ctx context.Context, key string) (desire, error) {
	if key != nb.ClusterName {
		return desire{}, nil // not the cluster this build knows: its rows are stale
	}
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		return desire{}, fmt.Errorf("list nodes: %w", err)
	}
	var refs []nb.ID
	var mgmtPorts []string
	for _, n := range nodes {
		rows, err := r.view.Owned(ctx, nb.Key{Kind: nb.Node, Name: n.Name})
		if err != nil {
			return desire{}, fmt.Errorf("rows of node %s: %w", n.Name, err)
		}
		for _, m := range rows {
			if lsp, ok := m.(*nbdb.LogicalSwitchPort); ok {
				if id, ok := nb.IDOf(m); ok && id.Role == nb.ManagementPort {
					mgmtPorts = append(mgmtPorts, lsp.UUID)
				}
			}
		}
		for _, role := range []nb.Role{nb.NodeSwitch, nb.GatewayRouter} {
			id := nb.NewID(nb.Node, n.Name, role)
			for _, m := range rows {
				if k, ok := nb.IDOf(m); ok && k == id {
					refs = append(refs, id)
					break
				}
			}
		}
	}
	rows := append(topology.Cluster(r.topo), topology.ClusterLBGroup(refs))
	// The ACL log meter is the cluster's too: every namespace's logged ACLs name it.
	rows = append(rows, netpol.MeterRows()...)
	// And the rules every node switch has, whatever the policies.
	cpCfg := r.cfg.ControlPlane
	cpCfg.MgmtAddr, cpCfg.MgmtMask = contract.ManagementAddresses(r.cfg.ClusterCIDR, r.cfg.NodeSubnetBits)
	cp, err := netpol.ClusterRows(cpCfg, mgmtPorts)
	if err != nil {
		return desire{}, err
	}
	return desire{rows: append(rows, cp...)}, nil
}
