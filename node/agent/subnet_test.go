package agent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// waitNodeSubnet waits through a missing Node and a Node without the annotation, and
// returns the subnet once the master has written it.
func TestWaitNodeSubnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset()
	got := make(chan error, 1)
	var subnet netip.Prefix
	go func() {
		var err error
		subnet, err = waitNodeSubnet(ctx, client, "win1", 10*time.Millisecond, logr.Discard())
		got <- err
	}()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1"}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("returned (%v, %v) before the master annotated the node", subnet, err)
	case <-time.After(50 * time.Millisecond):
	}
	node.Annotations = map[string]string{contract.NodeSubnetKey: "10.244.3.0/24"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || subnet != netip.MustParsePrefix("10.244.3.0/24") {
		t.Fatalf("waitNodeSubnet = %v, %v", subnet, err)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if _, err := waitNodeSubnet(short, client, "win2", 10*time.Millisecond, logr.Discard()); err == nil {
		t.Error("waitNodeSubnet for a node that never appears returned no error")
	}
}
