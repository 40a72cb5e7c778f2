//go:build linux

package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// ClusterDialer opens a connection to addr (host:port) from wherever the cluster's nodes and
// pods are reachable.
type ClusterDialer func(ctx context.Context, addr string) (net.Conn, error)

// egressProxy is the API server's way into the cluster: the API server runs in the root
// network namespace, the kubelets listen on node addresses inside the nodes' namespaces, so
// its "cluster" egress (kubelet exec, logs, port-forward; the pod and service proxy) is an
// HTTP CONNECT over a unix socket (--egress-selector-config-file), and this proxy dials each
// target through the dialer the cluster set (Kube.SetClusterDialer).
type egressProxy struct {
	ln net.Listener

	mu   sync.Mutex
	dial ClusterDialer
	wg   sync.WaitGroup
}

func startEgressProxy(path string) (*egressProxy, error) {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p := &egressProxy{ln: ln}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *egressProxy) setDialer(d ClusterDialer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dial = d
}

func (p *egressProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// handle answers one CONNECT and then copies both ways until either side closes.
func (p *egressProxy) handle(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	p.mu.Lock()
	dial := p.dial
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var up net.Conn
	if dial != nil {
		up, err = dial(ctx, req.Host)
	} else {
		up, err = (&net.Dialer{}).DialContext(ctx, "tcp", req.Host)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n%v", err)
		return
	}
	defer up.Close()
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); closeWrite(up); done <- struct{}{} }()
	go func() { io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func (p *egressProxy) Close() error {
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// egressConfig is the API server's --egress-selector-config-file: cluster traffic through
// the proxy at socket.
func egressConfig(socket string) string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket)
}
