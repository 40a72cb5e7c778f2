package agent

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// waitNodeSubnet returns the pod subnet the master annotated on the node, reading the Node
// every poll until it has one or ctx ends. A Windows node needs it before its uplink:
// the Transparent network is created with it (see hostnet.Uplink.PodSubnet). The master
// allocates it whether or not the node is a chassis yet, so waiting here cannot deadlock.
func waitNodeSubnet(ctx context.Context, client kubernetes.Interface, node string, poll time.Duration, log logr.Logger) (netip.Prefix, error) {
	logged := false
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		switch {
		case err == nil && n.Annotations[contract.NodeSubnetKey] != "":
			return contract.ParseNodeSubnet(n.Annotations[contract.NodeSubnetKey])
		case err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil:
			log.Info("reading the Node for its subnet", "node", node, "error", err.Error())
		case !logged:
			log.Info("waiting for the master to allocate the node subnet (the HNS network is created with it)",
				"node", node, "annotation", contract.NodeSubnetKey)
			logged = true
		}
		select {
		case <-ctx.Done():
			return netip.Prefix{}, fmt.Errorf("waiting for the node subnet of %s: %w", node, ctx.Err())
		case <-time.After(poll):
		}
	}
}
