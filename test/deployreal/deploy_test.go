//go:build linux

// Package deployreal deploys ovn-transparent the way an operator with a running cluster does:
// the image `make images` built from images/linux/Dockerfile is imported into every node's
// containerd, and images/manifests/ is applied (the ConfigMap filled for this cluster, the
// master's TLS Secret made from the run's PKI, each node's certificate put on the host). The
// nodes are real kubelet and containerd on which nothing of ours runs beforehand
// (cluster.Options.Bare): the DaemonSet and the Deployment bring up Open vSwitch,
// ovn-controller, the node agents and the masters. The oracle is what pods can reach.
//
// It needs the image archive: `make deploy-test` builds it and runs this package with
// OVNT_IMAGE_ARCHIVE set; without it the test is skipped (it is not part of make test).
package deployreal

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/images"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
	"github.com/ovn-transparent/ovn-transparent/test/cluster"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
)

// TestManifests deploys the image with the manifests and checks the cluster's network.
func TestManifests(t *testing.T) {
	archive := os.Getenv("OVNT_IMAGE_ARCHIVE")
	if archive == "" {
		t.Skip("opt-in: make deploy-test builds the image and runs this test (OVNT_IMAGE_ARCHIVE)")
	}
	testenv.RequireRoot(t, "containerd", "runc", "ctr", "nsenter", "unshare", "busybox", "/usr/lib/cni/loopback")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := harness.NewTestRun(t)
	start := time.Now()
	c, err := cluster.Start(ctx, r, cluster.Options{Bare: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bare cluster up in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	if err := c.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("image imported into %d nodes in %s", len(c.Nodes), time.Since(start).Round(time.Second))
	d := &deployment{t: t, c: c}
	t.Cleanup(func() {
		if t.Failed() {
			d.dump(context.Background())
		}
	})
	start = time.Now()
	d.apply(ctx)
	d.waitRolledOut(ctx)
	if err := c.WaitNodesReady(ctx); err != nil {
		d.dump(ctx)
		t.Fatal(err)
	}
	t.Logf("deployed: DaemonSet and Deployment rolled out, nodes Ready, in %s", time.Since(start).Round(time.Second))
	for _, n := range c.Nodes {
		out, err := n.VSCtl(ctx, "get", "Bridge", "br-int", "datapath_type")
		if err != nil || strings.TrimSpace(out) != "netdev" {
			t.Errorf("node %s: br-int datapath_type %q (%v), want netdev from the ConfigMap", n.Name, out, err)
		}
	}

	d.checkChassis(ctx, "deployed")

	w := newWorkloads(ctx, t, c)
	w.checkFlows(ctx, t)
	w.checkPolicy(ctx, t)
	d.checkRollingRestart(ctx, w)
	d.checkMasterFailover(ctx, w)
}

// deployment is the manifests applied to one cluster.
type deployment struct {
	t *testing.T
	c *cluster.Cluster
}

// config is the ConfigMap's data for this cluster: the API server where every node reaches
// it (127.0.0.1 in each node's namespace, cluster.Node.Kubeconfig), OVN central on the
// underlay over TLS, the userspace datapath (no openvswitch module on these machines).
func (d *deployment) config() map[string]any {
	var server *url.URL
	for _, n := range d.c.Nodes {
		kc, err := clientcmd.LoadFromFile(n.Kubeconfig)
		if err != nil {
			d.t.Fatal(err)
		}
		for _, cl := range kc.Clusters {
			u, err := url.Parse(cl.Server)
			if err != nil {
				d.t.Fatal(err)
			}
			if server != nil && u.Host != server.Host {
				d.t.Fatalf("node %s reaches the API server at %s, another node at %s: the ConfigMap has one address", n.Name, u.Host, server.Host)
			}
			server = u
		}
	}
	return map[string]any{
		"api-server-host":           server.Hostname(),
		"api-server-port":           server.Port(),
		"nb-address":                d.c.Central.NBUnderlayRemote,
		"sb-address":                d.c.Central.SBChassisRemote,
		"cluster-cidr":              d.c.ClusterCIDR(),
		"service-cidr":              "10.96.0.0/16",
		"allowed-external-ip-cidrs": "",
		"control-plane-addresses":   harness.CentralIP,
		"encap-type":                "geneve",
		"uplink-interface":          "eth0",
		"datapath-type":             "netdev",
	}
}

// apply writes each node's certificate where the DaemonSet mounts it, creates the master's
// Secret, and applies every manifest as it is but for the ConfigMap, filled with config().
// The image is imported into the nodes, not pulled (no registry is reachable): the
// manifests' imagePullPolicy IfNotPresent must let the runtime use it.
func (d *deployment) apply(ctx context.Context) {
	t := d.t
	for _, n := range d.c.Nodes {
		dir := n.Dir + "/" + cluster.BareHostPaths["/etc/ovn-transparent/pki"]
		for src, dst := range map[string]string{n.SBCert.CertFile: "ovnt-node-cert.pem", n.SBCert.KeyFile: "ovnt-node-privkey.pem", n.SBCert.CAFile: "cacert.pem"} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir+"/"+dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	objs, err := images.Objects()
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]any{}
	mc := d.c.Central.MasterCert
	for key, src := range map[string]string{"tls.crt": mc.CertFile, "tls.key": mc.KeyFile, "ca.crt": mc.CAFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		secret[key] = string(b)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			if err := unstructured.SetNestedField(o.Object, d.config(), "data"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if objs[0].GetKind() != "Namespace" {
		t.Fatalf("the manifests begin with a %s, not the Namespace", objs[0].GetKind())
	}
	secretObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "ovnt-master-tls", "namespace": images.Namespace},
		"stringData": secret,
	}}
	// The Secret right after its Namespace, before the Deployment that mounts it.
	objs = append(objs[:1:1], append([]*unstructured.Unstructured{secretObj}, objs[1:]...)...)
	if err := cluster.ApplyObjects(ctx, d.c.Kube.RESTConfig(), objs, false); err != nil {
		t.Fatal(err)
	}
}
