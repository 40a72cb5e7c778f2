package services

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// HealthServers serves each externalTrafficPolicy Local Service's healthCheckNodePort on the
// node IP: an external load balancer asks every node and sends traffic only to the ones
// answering 200, the nodes with a local endpoint (the others' gateway routers have no
// backend for the Service and would drop it).
type HealthServers struct {
	ip netip.Addr

	mu      sync.Mutex
	servers map[uint16]*healthServer
}

type healthServer struct {
	state atomic.Pointer[HealthCheck]
	srv   *http.Server
}

// healthBody is the answer's JSON, the shape load balancer integrations know from
// kube-proxy.
type healthBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints int `json:"localEndpoints"`
}

// NewHealthServers returns servers listening on ip once Set gives them ports.
func NewHealthServers(ip netip.Addr) *HealthServers {
	return &HealthServers{ip: ip, servers: map[uint16]*healthServer{}}
}

// Set makes the servers exactly checks: a new port starts listening, a port gone stops, a
// port kept answers with its new state at once. Idempotent. A port that cannot be listened
// on (in use) is reported in the error and tried again at the next Set; the others are set
// all the same.
func (h *HealthServers) Set(checks map[uint16]HealthCheck) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, s := range h.servers {
		if _, ok := checks[port]; !ok {
			s.srv.Close()
			delete(h.servers, port)
		}
	}
	var errs []error
	for port, hc := range checks {
		if s, ok := h.servers[port]; ok {
			s.state.Store(&hc)
			continue
		}
		s, err := h.listen(port, hc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.servers[port] = s
	}
	return errors.Join(errs...)
}

func (h *HealthServers) listen(port uint16, hc HealthCheck) (*healthServer, error) {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(h.ip, port).String())
	if err != nil {
		return nil, fmt.Errorf("healthCheckNodePort %d of Service %s/%s: %w", port, hc.Namespace, hc.Name, err)
	}
	s := &healthServer{}
	s.state.Store(&hc)
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// ServeHTTP answers any path: 200 with local endpoints, 503 without.
func (s *healthServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	hc := s.state.Load()
	var body healthBody
	body.Service.Namespace, body.Service.Name, body.LocalEndpoints = hc.Namespace, hc.Name, hc.LocalEndpoints
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if hc.LocalEndpoints > 0 {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}

// Close stops every server.
func (h *HealthServers) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, s := range h.servers {
		s.srv.Close()
		delete(h.servers, port)
	}
}
