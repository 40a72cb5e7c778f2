//go:build linux

package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/netns"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestFlows: the nine connectivity flows of the project's seed, with pods that kubelet runs
// and names that cluster DNS answers: pod to pod on one node and across nodes; pod to a
// Service by IP, short name, namespace-qualified name and FQDN; pod to the external host by
// IP and by a DNS name CoreDNS forwards outside; node to pod and pod to node (its own and
// another). DNS answers over UDP and TCP, and the SRV record of the Service's named port.
func TestFlows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "demo")
	n1, n2 := cl.Nodes[0], cl.Nodes[1]
	webA, webB := netexec(ns, "web-a", n1.Name, 8080, false), netexec(ns, "web-b", n2.Name, 8080, false)
	for _, p := range []*corev1.Pod{webA, webB} {
		p.Labels["app"] = "web"
		create(ctx, t, p)
	}
	create(ctx, t, netexec(ns, "host-2", n2.Name, 8081, true))
	create(ctx, t, netexec(ns, "host-1", n1.Name, 8082, true))
	create(ctx, t, clientPod(ns, n1.Name))
	svc, err := cl.Kube.Client().CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopExternal := externalHTTP(t, "external host")
	defer stopExternal()
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"web-a", "web-b", "host-2", "host-1", "client"} {
		pods[name] = waitReady(ctx, t, ns, name)
	}
	ext := cl.External.IP

	// From the client pod through its own resolver (search list from kubelet) and network.
	for _, f := range []struct{ what, target string }{
		{"pod -> pod, same node", pods["web-a"].Status.PodIP + ":8080"},
		{"pod -> pod, other node", pods["web-b"].Status.PodIP + ":8080"},
		{"pod -> Service by IP", svc.Spec.ClusterIP + ":80"},
		{"pod -> Service by short name", "web:80"},
		{"pod -> Service by namespace-qualified name", "web.demo:80"},
		{"pod -> Service by FQDN", "web.demo.svc.cluster.local:80"},
		{"pod -> external host by IP", ext + ":8080"},
		{"pod -> external host by DNS name", cluster.ExternalName + ":8080"},
		{"pod -> node (hostNetwork server on the other node)", n2.IP + ":8081"},
		// status.hostIP: agents on the pod's own node (audit M8).
		{"pod -> its own node (hostNetwork server there)", n1.IP + ":8082"},
	} {
		if out, err := podExec(ctx, ns, "client", "/agnhost", "connect", "--timeout=5s", f.target); err != nil {
			t.Errorf("%s (%s): %v: %s", f.what, f.target, err, out)
		}
	}
	// Contents, not only connections: who answered.
	if out, _ := podExec(ctx, ns, "client", "curl", "-s", "-m", "5", "http://"+svc.Spec.ClusterIP+"/hostname"); !strings.HasPrefix(strings.TrimSpace(out), "web-") {
		t.Errorf("pod -> Service: %q, want a web pod's name", out)
	}
	if out, _ := podExec(ctx, ns, "client", "curl", "-s", "-m", "5", "http://"+ext+":8080/"); strings.TrimSpace(out) != "external host" {
		t.Errorf("pod -> external host: %q", out)
	}
	for _, p := range []*corev1.Pod{pods["web-a"], pods["web-b"]} {
		out, err := harness.Exec(ctx, n1.Netns, "busybox", "timeout", "5", "busybox", "wget", "-q", "-O", "-", "http://"+p.Status.PodIP+":8080/hostname")
		if err != nil || strings.TrimSpace(out) != p.Name {
			t.Errorf("node %s -> pod %s: %q (%v)", n1.Name, p.Name, out, err)
		}
	}

	// DNS itself, from inside the client pod's network namespace: UDP and TCP, A and SRV.
	sandbox, err := n1.PodNetnsPath(ctx, ns, "client")
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"udp", "tcp"} {
		// The resolver queries from goroutines of its own: each socket is opened inside the
		// pod's namespace, where it then stays.
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (conn net.Conn, err error) {
			err = netns.Do(sandbox, func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, proto, net.JoinHostPort(cluster.ClusterDNS, "53"))
				return err
			})
			return conn, err
		}}
		err := func() error {
			addrs, err := r.LookupHost(ctx, "web.demo.svc.cluster.local.")
			if err != nil || len(addrs) != 1 || addrs[0] != svc.Spec.ClusterIP {
				return fmt.Errorf("A web.demo.svc.cluster.local: %v (%v), want %s", addrs, err, svc.Spec.ClusterIP)
			}
			_, srvs, err := r.LookupSRV(ctx, "http", "tcp", "web.demo.svc.cluster.local.")
			if err != nil || len(srvs) != 1 || srvs[0].Port != 80 || srvs[0].Target != "web.demo.svc.cluster.local." {
				return fmt.Errorf("SRV _http._tcp.web.demo.svc.cluster.local: %+v (%v)", srvs, err)
			}
			if addrs, err := r.LookupHost(ctx, cluster.ExternalName+"."); err != nil || len(addrs) != 1 || addrs[0] != ext {
				return fmt.Errorf("A %s: %v (%v), want %s", cluster.ExternalName, addrs, err, ext)
			}
			// A reverse lookup of an address the cluster does not know falls through the
			// kubernetes plugin to the upstream resolver, as upstream's PTR forwarding test wants.
			if names, err := r.LookupAddr(ctx, cluster.PublicAddr); err != nil || len(names) != 1 || names[0] != cluster.PublicName+"." {
				return fmt.Errorf("PTR %s: %v (%v), want %s.", cluster.PublicAddr, names, err, cluster.PublicName)
			}
			return nil
		}()
		if err != nil {
			t.Errorf("DNS over %s: %v", proto, err)
		}
	}
}

// externalHTTP serves body on the external host at :8080 with busybox httpd.
func externalHTTP(t *testing.T, body string) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := run.Start(harness.ProcSpec{Name: "external-http", Netns: cl.External.Netns, Path: "busybox",
		Args: []string{"httpd", "-f", "-p", cl.External.IP + ":8080", "-h", dir}})
	if err != nil {
		t.Fatal(err)
	}
	return func() { p.Stop() }
}
