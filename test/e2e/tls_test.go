//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestOVNCentralTLS (security audit C1): every node's ovn-controller reaches the SB over TLS
// with the node's own certificate, which ovnt-node wrote into the SSL row; and a pod that a
// NetworkPolicy lets through to the central's NB and SB ports (past the control plane's
// default deny) still learns nothing without a certificate: the audit had list_dbs answer
// ["OVN_Northbound"] to any pod.
func TestOVNCentralTLS(t *testing.T) {
	ctx := context.Background()
	for _, n := range cl.Nodes {
		if n.Remote != nil {
			continue // its ovn-controller is elsewhere, with its own TLS files (TestRemoteChassis)
		}
		remote, err := n.VSCtl(ctx, "get", "Open_vSwitch", ".", "external_ids:ovn-remote")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Trim(strings.TrimSpace(remote), `"`); got != cl.Central.SBChassisRemote {
			t.Errorf("%s: ovn-remote %s, want %s", n.Name, got, cl.Central.SBChassisRemote)
		}
		ssl, err := n.VSCtl(ctx, "get-ssl")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{n.SBCert.KeyFile, n.SBCert.CertFile, n.SBCert.CAFile} {
			if !strings.Contains(ssl, f) {
				t.Errorf("%s: SSL row %q lacks %s", n.Name, ssl, f)
			}
		}
		if st, err := n.AppCtl(ctx, "ovn-controller", "connection-status"); err != nil || strings.TrimSpace(st) != "connected" {
			t.Errorf("%s: ovn-controller connection-status %q %v", n.Name, st, err)
		}
	}

	ns := testNamespace(t)
	cli := startPod(t, workloadPod(ns, "client", "node1", "client"))
	netns := podNetns(t, cli)
	nbPort, sbPort := intstr.FromInt32(harness.NBPort), intstr.FromInt32(harness.SBPort)
	_, err := client().NetworkingV1().NetworkPolicies(ns).Create(t.Context(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "to-central"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: harness.CentralIP + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &nbPort}, {Port: &sbPort}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{harness.NBPort, harness.SBPort} {
		addr := fmt.Sprintf("%s:%d", harness.CentralIP, port)
		var dbs string
		// Until the policy's ACLs are in, the connection itself is dropped.
		poll.Eventually(t, ctx, "a TCP connection from the pod to "+addr, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
			dbs, err = harness.ListDBs(netns, addr, nil)
			var op *net.OpError
			return !(errors.As(err, &op) && op.Op == "dial"), err
		})
		if err == nil {
			t.Errorf("a pod's list_dbs over plain TCP to %s answered %s", addr, dbs)
		} else {
			t.Logf("a pod's list_dbs to %s, connected: %v", addr, err)
		}
	}
}
