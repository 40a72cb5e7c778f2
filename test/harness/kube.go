//go:build linux

package harness

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/pkitest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names of the control-plane components, as processes of the run (logs/<name>.out) and as
// arguments to Kube.StopComponent and Kube.StartComponent.
const (
	KubeEtcd              = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// KubeOptions configure StartKube. The zero value is a complete control plane.
type KubeOptions struct {
	// BinDir holds kube-apiserver, kube-controller-manager and kube-scheduler.
	// Default: EnsureKubeBinaries(ctx, KubeVersion, r.Logf).
	BinDir string
	// Etcd is the etcd binary. Default: $OVNT_ETCD, else /usr/bin/etcd (Debian's 3.4 works).
	Etcd string
	// ServiceCIDR is the API server's --service-cluster-ip-range. Default: 10.96.0.0/16.
	ServiceCIDR string
	// APIServerOnly starts etcd and the API server but no controller-manager or scheduler.
	APIServerOnly bool
	// AdvertiseAddress is the API server's address in the "kubernetes" Service's endpoints
	// (what pods reach through its ClusterIP); default 127.0.0.1, which pods cannot reach.
	// Make it reachable with Kube.ExposeAt.
	AdvertiseAddress string
	// Extra flags appended to each component's command line. A repeated scalar flag takes
	// the later value; list flags (--disable-admission-plugins, ...) accumulate instead.
	APIServerArgs, ControllerManagerArgs, SchedulerArgs []string
}

// Kube is a running control plane of a Run. Everything it started stops at r.Close.
type Kube struct {
	// Kubeconfig is the path of an admin kubeconfig for the root network namespace.
	Kubeconfig string
	// Host is the API server URL, https://127.0.0.1:<port>.
	Host string
	// Token is a bearer token of a user in system:masters.
	Token string
	// CAFile is the PEM CA that signed the API server's serving certificate.
	CAFile string
	// EtcdURL is etcd's client URL.
	EtcdURL string

	r       *Run
	dir     string
	caPEM   []byte
	apiPort int
	// etcd's client and peer ports; the API server's is apiPort.
	etcdPorts [2]int

	mu      sync.Mutex
	specs   map[string]ProcSpec
	procs   map[string]*Proc
	exposed map[string]string // netns -> kubeconfig path
	client  kubernetes.Interface
	egress  *egressProxy
}

// SetClusterDialer makes the API server reach nodes and pods (kubelet exec, logs and
// port-forward, the pod and service proxy) through d; until it is set, it dials from the
// root network namespace.
func (k *Kube) SetClusterDialer(d ClusterDialer) { k.egress.setDialer(d) }

// StartKube starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
// loopback as foreground children of the run, and returns once the API server is ready and
// the controller-manager has created the default ServiceAccount (so pods can be created).
// Ports are chosen free at random and re-chosen if a daemon loses a race for one, so runs in
// parallel do not collide. On error, whatever it started is stopped again.
//
// Nothing in this control plane plays kubelet or node lifecycle: Nodes are what the caller
// writes, and the TaintNodesByCondition admission plugin is off, so a Node is schedulable as
// soon as it exists (see startAPIServer).
func (r *Run) StartKube(ctx context.Context, opts KubeOptions) (*Kube, error) {
	start := time.Now()
	if opts.BinDir == "" {
		dir, err := EnsureKubeBinaries(ctx, KubeVersion, r.Logf)
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	if opts.Etcd == "" {
		opts.Etcd = os.Getenv("OVNT_ETCD")
	}
	if opts.Etcd == "" {
		opts.Etcd = "/usr/bin/etcd"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	k := &Kube{
		r:       r,
		dir:     r.Path("kube"),
		specs:   map[string]ProcSpec{},
		procs:   map[string]*Proc{},
		exposed: map[string]string{},
	}
	if opts.AdvertiseAddress == "" {
		opts.AdvertiseAddress = "127.0.0.1"
	}
	if err := k.writeCredentials(opts.ServiceCIDR, opts.AdvertiseAddress); err != nil {
		return nil, fmt.Errorf("kube: credentials: %w", err)
	}
	egress, err := startEgressProxy(k.path("egress.sock"))
	if err != nil {
		return nil, fmt.Errorf("kube: egress proxy: %w", err)
	}
	k.egress = egress
	r.AddCleanup("kube egress proxy", egress.Close)
	if err := os.WriteFile(k.path("egress.yaml"), []byte(egressConfig(k.path("egress.sock"))), 0o644); err != nil {
		return nil, err
	}
	success := false
	defer func() {
		if !success {
			k.stopAll()
		}
	}()

	if err := k.startWithFreePorts(ctx, func() error { return k.startEtcd(ctx, opts) }); err != nil {
		return nil, err
	}
	etcdReady := time.Now()
	if err := k.startWithFreePorts(ctx, func() error { return k.startAPIServer(ctx, opts) }); err != nil {
		return nil, err
	}
	apiReady := time.Now()
	if err := k.writeKubeconfig(k.Kubeconfig, k.Host); err != nil {
		return nil, err
	}
	if opts.APIServerOnly {
		success = true
		r.Logf("kube: API server ready in %s (etcd %s); kubeconfig %s", time.Since(start).Round(time.Millisecond),
			etcdReady.Sub(start).Round(time.Millisecond), k.Kubeconfig)
		return k, nil
	}
	if err := k.startControllers(ctx, opts); err != nil {
		return nil, err
	}
	success = true
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	r.Logf("kube: control plane ready in %s (etcd %s, kube-apiserver %s, controllers %s); kubeconfig %s",
		ms(time.Since(start)), ms(etcdReady.Sub(start)), ms(apiReady.Sub(etcdReady)), ms(time.Since(apiReady)), k.Kubeconfig)
	return k, nil
}

// errPortTaken says a daemon exited because another process bound its port between our
// check and its bind; the caller picks new ports and tries again.
var errPortTaken = errors.New("port taken")

func (k *Kube) startWithFreePorts(ctx context.Context, start func() error) error {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		if err = start(); !errors.Is(err, errPortTaken) {
			return err
		}
		k.r.Logf("kube: %v; retrying with other ports", err)
	}
	return err
}

// freePort returns a loopback TCP port nothing listens on now. It draws from below the
// kernel's ephemeral range (32768+ by default) so that outgoing connections, which take
// their source ports from that range, rarely take it before the daemon binds it.
func freePort() (int, error) {
	for range 100 {
		port := 20000 + mathrand.IntN(12000)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port found in 20000-31999")
}

// writeCredentials writes the token file, the service-account key pair, and a CA with the
// API server's serving certificate. Generating the serving certificate (instead of letting
// the API server self-sign one in --cert-dir) gives clients a CA to verify against from the
// start, valid for 127.0.0.1 in any network namespace the API server is exposed in.
func (k *Kube) writeCredentials(serviceCIDR, advertise string) error {
	if err := os.MkdirAll(filepath.Join(k.dir, "certs"), 0o700); err != nil {
		return err
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	k.Token = hex.EncodeToString(tok[:])
	tokens := k.Token + ",ovnt-admin,ovnt-admin,system:masters\n"
	if err := os.WriteFile(k.path("tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := pkitest.WritePEM(k.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	if err := pkitest.WritePEM(k.path("sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}

	prefix, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return fmt.Errorf("service CIDR: %w", err)
	}
	// Pods reach the API server at the first service IP (the "kubernetes" Service).
	kubernetesSvcIP := prefix.Masked().Addr().Next()
	notBefore := time.Now().Add(-time.Hour) // tolerate clock skew between namespaces' readers
	ca, err := pkitest.NewCA("ovnt-"+k.r.ID+"-ca", notBefore, 30*24*time.Hour)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, kubernetesSvcIP.AsSlice(), net.ParseIP(advertise)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	k.CAFile = k.path("ca.crt")
	k.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	if err := os.WriteFile(k.CAFile, k.caPEM, 0o644); err != nil {
		return err
	}
	if err := ca.Sign(srvTmpl, k.path("certs", "apiserver.crt"), k.path("certs", "apiserver.key")); err != nil {
		return err
	}
	// The API server's identity towards kubelets.
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.Sign(clientTmpl, k.path("certs", "kubelet-client.crt"), k.path("certs", "kubelet-client.key"))
}

func (k *Kube) path(elem ...string) string {
	return filepath.Join(append([]string{k.dir}, elem...)...)
}

func (k *Kube) startEtcd(ctx context.Context, opts KubeOptions) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	// The member name is unique to the run: the readiness check asks the etcd on the port
	// for its members, so an etcd of another run that won the port is not mistaken for ours.
	name := k.r.Name("etcd")
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	dataDir := k.path("etcd-data")
	// A failed attempt may have left a member with the old ports in the data dir.
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	spec := ProcSpec{
		Name: KubeEtcd,
		Path: opts.Etcd,
		Args: []string{
			"--name=" + name,
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + name + "=" + peerURL,
			"--logger=zap",
		},
	}
	k.EtcdURL = clientURL
	k.etcdPorts = [2]int{clientPort, peerPort}
	return k.startAndWait(ctx, spec, func(ctx context.Context) error { return etcdReady(ctx, clientURL, name) })
}

func etcdReady(ctx context.Context, url, name string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	body, err := httpDo(ctx, c, http.MethodGet, url+"/health", "")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s", body)
	}
	// The v3 gRPC gateway's member list names the member; see startEtcd.
	body, err = httpDo(ctx, c, http.MethodPost, url+"/v3/cluster/member/list", "")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"name":"`+name+`"`) {
		return fmt.Errorf("etcd at %s is not %s: %s", url, name, body)
	}
	return nil
}

func (k *Kube) startAPIServer(ctx context.Context, opts KubeOptions) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--etcd-servers=" + k.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=" + opts.AdvertiseAddress,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + k.path("certs"),
		"--tls-cert-file=" + k.path("certs", "apiserver.crt"),
		"--tls-private-key-file=" + k.path("certs", "apiserver.key"),
		"--token-auth-file=" + k.path("tokens.csv"),
		"--authorization-mode=RBAC",
		// kubelets verify the API server's client certificate against the CA and ask the API
		// server whether its user may exec, read logs, port-forward (webhook authorization).
		"--kubelet-client-certificate=" + k.path("certs", "kubelet-client.crt"),
		"--kubelet-client-key=" + k.path("certs", "kubelet-client.key"),
		"--egress-selector-config-file=" + k.path("egress.yaml"),
		// Node names resolve nowhere; kubelets serve on their node IPs.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + k.path("sa.pub"),
		"--service-account-signing-key-file=" + k.path("sa.key"),
		"--service-cluster-ip-range=" + opts.ServiceCIDR,
		"--allow-privileged=true",
		// The admission plugin gives every new Node the not-ready NoSchedule taint, and only
		// the node lifecycle controller, which the harness turns off, would lift it: pods
		// would never schedule. Nodes here are schedulable once registered, as the tests
		// (playing kubelet) decide.
		"--disable-admission-plugins=TaintNodesByCondition",
	}
	spec := ProcSpec{
		Name: KubeAPIServer,
		Path: filepath.Join(opts.BinDir, "kube-apiserver"),
		Args: append(args, opts.APIServerArgs...),
		// Graceful shutdown drains requests; give it longer than the default 5s.
		StopTimeout: 15 * time.Second,
	}
	k.apiPort = port
	k.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	k.Kubeconfig = k.path("kubeconfig")
	return k.startAndWait(ctx, spec, k.apiServerReady)
}

// apiServerReady checks /readyz over TLS verified against our CA with our token, which only
// our API server can answer.
func (k *Kube) apiServerReady(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.caPEM)
	c := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer c.CloseIdleConnections()
	body, err := httpDo(ctx, c, http.MethodGet, k.Host+"/readyz", k.Token)
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) != "ok" {
		return fmt.Errorf("/readyz: %s", body)
	}
	return nil
}

func httpDo(ctx context.Context, c *http.Client, method, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, lastLines(string(body), 10))
	}
	return string(body), nil
}

func (k *Kube) startControllers(ctx context.Context, opts KubeOptions) error {
	common := []string{
		"--kubeconfig=" + k.Kubeconfig,
		"--authentication-kubeconfig=" + k.Kubeconfig,
		"--authorization-kubeconfig=" + k.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		// No serving port: nothing scrapes them, and two runs would fight over the defaults.
		"--secure-port=0",
	}
	kcm := ProcSpec{
		Name: KubeControllerManager,
		Path: filepath.Join(opts.BinDir, "kube-controller-manager"),
		Args: append(append(append([]string{}, common...),
			"--service-account-private-key-file="+k.path("sa.key"),
			"--root-ca-file="+k.CAFile,
			// The network plugin owns node IPAM, routes and load balancers; node lifecycle
			// would taint and evict nodes that have no kubelet heartbeating.
			"--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service",
		), opts.ControllerManagerArgs...),
	}
	sched := ProcSpec{
		Name: KubeScheduler,
		Path: filepath.Join(opts.BinDir, "kube-scheduler"),
		Args: append(append([]string{}, common...), opts.SchedulerArgs...),
	}
	// Neither serves a health endpoint with --secure-port=0; the controller-manager shows it
	// works by creating the default ServiceAccount, which pod admission requires.
	if err := k.startAndWait(ctx, kcm, k.defaultServiceAccountReady); err != nil {
		return err
	}
	return k.startAndWait(ctx, sched, nil)
}

func (k *Kube) defaultServiceAccountReady(ctx context.Context) error {
	_, err := k.Client().CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return errors.New("no default ServiceAccount yet")
	}
	return err
}

// startAndWait starts spec and polls ready (nil: none) until it succeeds. If the process
// exits first, the error carries the end of its log, and wraps errPortTaken when the log
// says a port was taken.
func (k *Kube) startAndWait(ctx context.Context, spec ProcSpec, ready func(context.Context) error) error {
	logPath := filepath.Join(k.r.LogDir, spec.Name+".out")
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	p, err := k.r.Start(spec)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.specs[spec.Name] = spec
	k.procs[spec.Name] = p
	k.mu.Unlock()
	if ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-p.Done():
			out := logSince(logPath, offset)
			if strings.Contains(out, "address already in use") {
				return fmt.Errorf("%s: %w: %s", spec.Name, errPortTaken, lastLines(out, 3))
			}
			return fmt.Errorf("kube: %s exited before it was ready (%v): %s", spec.Name, p.Err(), lastLines(out, 20))
		case <-ctx.Done():
			p.Stop()
			return fmt.Errorf("kube: %s not ready: %w (last: %v); log %s", spec.Name, ctx.Err(), last, logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	f.Seek(offset, io.SeekStart)
	b, _ := io.ReadAll(f)
	return string(b)
}

func (k *Kube) stopAll() {
	k.mu.Lock()
	procs := []*Proc{}
	for _, name := range []string{KubeScheduler, KubeControllerManager, KubeAPIServer, KubeEtcd} {
		if p := k.procs[name]; p != nil {
			procs = append(procs, p)
		}
	}
	k.mu.Unlock()
	for _, p := range procs {
		p.Stop()
	}
}

// StopComponent stops one component (KubeEtcd, KubeAPIServer, KubeControllerManager,
// KubeScheduler) with its stop signal, as an operator or a crash test would. Stopping a
// stopped component does nothing.
func (k *Kube) StopComponent(name string) error {
	k.mu.Lock()
	p := k.procs[name]
	k.mu.Unlock()
	if p == nil {
		return fmt.Errorf("kube: no component %q", name)
	}
	return p.Stop()
}

// StartComponent starts a stopped component again with the same flags and ports, and for
// etcd and the API server waits until it is ready. It fails if the component is running.
func (k *Kube) StartComponent(ctx context.Context, name string) error {
	k.mu.Lock()
	spec, ok := k.specs[name]
	p := k.procs[name]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("kube: no component %q", name)
	}
	if !p.isDone() {
		return fmt.Errorf("kube: %s is running", name)
	}
	var ready func(context.Context) error
	switch name {
	case KubeEtcd:
		// Same data dir and member as before: the restarted etcd keeps the cluster's state.
		ready = func(ctx context.Context) error { return etcdReady(ctx, k.EtcdURL, k.r.Name("etcd")) }
	case KubeAPIServer:
		ready = k.apiServerReady
	}
	return k.startAndWait(ctx, spec, ready)
}

// RESTConfig returns a new admin client configuration for the root network namespace; the
// caller may modify it.
func (k *Kube) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            k.Host,
		BearerToken:     k.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), k.caPEM...)},
		// Tests create objects in bursts; client-go's default 5 QPS would throttle them.
		QPS:       100,
		Burst:     200,
		UserAgent: "ovnt-harness",
	}
}

// Client returns an admin clientset (the same one on every call).
func (k *Kube) Client() kubernetes.Interface {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client == nil {
		// NewForConfig fails only on a malformed config, and ours is built above.
		k.client = kubernetes.NewForConfigOrDie(k.RESTConfig())
	}
	return k.client
}

func (k *Kube) writeKubeconfig(path, server string) error {
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"ovnt": {Server: server, CertificateAuthorityData: k.caPEM},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"ovnt-admin": {Token: k.Token},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"ovnt": {Cluster: "ovnt", AuthInfo: "ovnt-admin", Namespace: metav1.NamespaceDefault},
		},
		CurrentContext: "ovnt",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("kube: writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// ExposeAt makes the API server reachable at ip (on its own port) inside the network
// namespace netns, where ip must be an address of the namespace: the advertise address the
// "kubernetes" Service sends pods to.
func (k *Kube) ExposeAt(netns, ip string) error {
	var ln net.Listener
	err := InNetns(netns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(k.apiPort)))
		return err
	})
	if err != nil {
		return fmt.Errorf("kube: listening on %s in %s: %w", ip, netns, err)
	}
	fwd := &tcpForwarder{ln: ln, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(k.apiPort)), conns: map[net.Conn]struct{}{}}
	fwd.wg.Add(1)
	go fwd.serve()
	k.r.AddCleanup("kube API forwarder at "+ip+" in "+netns, fwd.Close)
	return nil
}

// ExposeInNetns makes the API server reachable from inside the network namespace netns (a
// full name, as AddNetns returns) and returns the path of a kubeconfig that reaches it there.
// A namespace has its own loopback, so the root namespace's 127.0.0.1 is out of reach from a
// node's processes; a listener opened inside netns on 127.0.0.1 (on the API server's port
// when it is free there) forwards each connection from the test process to the API server.
// The serving certificate is valid for 127.0.0.1, so clients verify TLS as usual. The
// forwarder closes at r.Close. Calling it again for the same netns returns the same file.
func (k *Kube) ExposeInNetns(netns string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if path, ok := k.exposed[netns]; ok {
		return path, nil
	}
	var ln net.Listener
	err := InNetns(netns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(k.apiPort)))
		if err != nil {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("kube: listening in %s: %w", netns, err)
	}
	fwd := &tcpForwarder{ln: ln, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(k.apiPort)), conns: map[net.Conn]struct{}{}}
	fwd.wg.Add(1)
	go fwd.serve()
	k.r.AddCleanup("kube API forwarder in "+netns, fwd.Close)
	path := k.path("kubeconfig-" + strings.TrimPrefix(netns, k.r.Name("")))
	if err := k.writeKubeconfig(path, "https://"+ln.Addr().String()); err != nil {
		return "", err
	}
	k.exposed[netns] = path
	return path, nil
}
