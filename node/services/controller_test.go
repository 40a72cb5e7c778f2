package services

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ovn-transparent/ovn-transparent/internal/openflow"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/node/gateway"
	"github.com/ovn-transparent/ovn-transparent/node/localnat"
)

// fakeGateway and fakeNAT keep what they were last given.
type fakeGateway struct {
	mu  sync.Mutex
	nps []gateway.NodePort
}

func (g *fakeGateway) SetNodePorts(nps []gateway.NodePort) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nps = slices.Clone(nps)
}

func (g *fakeGateway) get() []gateway.NodePort {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nps
}

type fakeNAT struct {
	mu    sync.Mutex
	rules []localnat.Rule
	syncs int
}

func (n *fakeNAT) Sync(_ context.Context, rules []localnat.Rule) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rules, n.syncs = slices.Clone(rules), n.syncs+1
	return nil
}

func (n *fakeNAT) Delete(context.Context) error { return nil }

func (n *fakeNAT) get() []localnat.Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rules
}

// eventually is poll.Eventually for this file's conditions, which have no error to report.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, t.Context(), what, 10*time.Second, 20*time.Millisecond, func() (bool, error) { return cond(), nil })
}

// runController runs c until the test ends, and returns once its informers watch: the fake
// clientset drops what is created between an informer's list and its watch, so a test that
// created objects right after starting could wait for them forever.
func runController(t *testing.T, client *fake.Clientset, c *Controller) {
	t.Helper()
	watching := make(chan struct{}, 16)
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		watching <- struct{}{}
		return true, w, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for range 3 { // Services, EndpointSlices, Nodes
		select {
		case <-watching:
		case <-time.After(10 * time.Second):
			t.Fatal("the controller's informers did not start watching")
		}
	}
}

// TestController: Services and EndpointSlices in the API server become the gateway's entry
// points, the local NAT rules and health servers, and follow changes and deletion.
func TestController(t *testing.T) {
	ip := netip.MustParseAddr("127.0.0.1")
	client := fake.NewClientset()
	gw, nat := &fakeGateway{}, &fakeNAT{}
	c := New(Config{NodeName: "node1", NodeIP: ip, PodNetworks: pods, Gateway: gw, NAT: nat}, client, logr.Discard())
	runController(t, client, c)
	ctx := t.Context()

	hcPort := freePort(t)
	s := svc("lb", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		s.Spec.Ports = s.Spec.Ports[:1]
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = int32(hcPort)
	})
	if _, err := client.CoreV1().Services("ns").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []gateway.NodePort{{Protocol: openflow.IPProtoTCP, Port: 30080}}
	eventually(t, "the NodePort at the gateway", func() bool { return slices.Equal(gw.get(), want) })
	// externalTrafficPolicy=Local: the host's own connection keeps the node IP.
	wantNAT := []localnat.Rule{{Protocol: openflow.IPProtoTCP, NodeIP: ip, NodePort: 30080, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 80, KeepSource: true}}
	eventually(t, "the local NAT rule", func() bool { return slices.Equal(nat.get(), wantNAT) })
	status := func() int {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + netip.AddrPortFrom(ip, hcPort).String() + "/")
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, "503 without endpoints", func() bool { return status() == http.StatusServiceUnavailable })

	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice("lb", "lb-1", ep{addr: "10.244.1.5", node: "node1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "200 with a local endpoint", func() bool { return status() == http.StatusOK })

	if err := client.CoreV1().Services("ns").Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no entry points", func() bool { return len(gw.get()) == 0 })
	eventually(t, "no NAT rules", func() bool { return len(nat.get()) == 0 })
	eventually(t, "the health server gone", func() bool { return status() == -1 })
}

// M5: a Service over the limits gets no entry point on the node (the audit's one Service of
// 5,000 ports and 20 external IPs was 200,000 gateway flows on every node); a Service within
// them beside it keeps its own.
func TestControllerRefusesTooLargeService(t *testing.T) {
	ip := netip.MustParseAddr("127.0.0.1")
	client := fake.NewClientset()
	gw := &fakeGateway{}
	c := New(Config{NodeName: "node1", NodeIP: ip, Gateway: gw,
		Limits: svcmodel.Limits{PerService: svcmodel.DefaultMaxServiceFrontends}}, client, logr.Discard())
	runController(t, client, c)
	ctx := t.Context()

	huge := svc("huge", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
		s.Spec.Ports = nil
		for i := range 5000 {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint(i), Protocol: corev1.ProtocolTCP,
				Port: int32(1000 + i), NodePort: int32(20000 + i)})
		}
	})
	small := svc("small", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[:1] })
	for _, s := range []*corev1.Service{huge, small} {
		if _, err := client.CoreV1().Services("ns").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []gateway.NodePort{{Protocol: openflow.IPProtoTCP, Port: 30080}}
	eventually(t, "only the small Service's NodePort", func() bool { return slices.Equal(gw.get(), want) })
}
