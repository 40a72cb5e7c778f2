// Package health serves what operators watch a daemon through: Prometheus metrics on
// /metrics, liveness on /healthz (the process runs and its loops turn) and readiness on
// /readyz (it does its job: for the master, informers synced and the NB connected; for a
// node agent, the chassis registered, OVSDB connected, the CNI server listening). Kubernetes
// probes and Prometheus scrape the same address.
//
// A check answers nil when it passes. /healthz and /readyz answer 200 "ok" when every check
// of their kind passes, else 503 with one line per check, "[+]name ok" or "[-]name: reason",
// the format of the Kubernetes components' own endpoints.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one named condition of liveness or readiness.
type Check struct {
	Name string
	Fn   func() error
}

// Server holds a daemon's metrics registry and checks.
type Server struct {
	// Registry is where the daemon's metrics are registered; it already holds the Go
	// runtime's and the process's collectors.
	Registry *prometheus.Registry

	mu           sync.Mutex
	live, readyz []Check
}

// New returns a server with a fresh registry.
func New() *Server {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Server{Registry: reg}
}

// AddLiveness adds a check to /healthz: one that fails tells the kubelet (or systemd's
// watchdog, or an operator) to restart the process.
func (s *Server) AddLiveness(name string, fn func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = append(s.live, Check{name, fn})
}

// AddReadiness adds a check to /readyz: one that fails says the daemon cannot do its job
// now (waiting for a database, say), not that a restart would help.
func (s *Server) AddReadiness(name string, fn func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyz = append(s.readyz, Check{name, fn})
}

// Handler serves /metrics, /healthz and /readyz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { s.answer(w, s.checks(false)) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { s.answer(w, s.checks(true)) })
	return mux
}

func (s *Server) checks(ready bool) []Check {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ready {
		return append([]Check(nil), s.readyz...)
	}
	return append([]Check(nil), s.live...)
}

func (s *Server) answer(w http.ResponseWriter, checks []Check) {
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.Fn(); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s: %v\n", c.Name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, b.String())
		return
	}
	fmt.Fprint(w, "ok\n")
}

// Serve listens on addr (host:port; empty disables) and serves Handler until ctx ends. It
// returns once the listener is open, or with the error that kept it from opening; a
// failure later is logged through errf.
func (s *Server) Serve(ctx context.Context, addr string, errf func(error)) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errf(fmt.Errorf("health: serving %s: %w", addr, err))
		}
	}()
	return nil
}
