package services

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// get returns the status and the decoded body, or the error text as status -1.
func get(t *testing.T, port uint16) (int, healthBody, string) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		return -1, healthBody{}, err.Error()
	}
	defer resp.Body.Close()
	var b healthBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatalf("port %d: body: %v", port, err)
	}
	return resp.StatusCode, b, resp.Header.Get("Content-Type")
}

func TestHealthServers(t *testing.T) {
	h := NewHealthServers(netip.MustParseAddr("127.0.0.1"))
	defer h.Close()
	p1, p2 := freePort(t), freePort(t)
	if err := h.Set(map[uint16]HealthCheck{p1: {"ns", "a", 2}, p2: {"ns", "b", 0}}); err != nil {
		t.Fatal(err)
	}
	code, body, ct := get(t, p1)
	if code != 200 || body.LocalEndpoints != 2 || body.Service.Namespace != "ns" || body.Service.Name != "a" || ct != "application/json" {
		t.Errorf("a: %d %+v %s", code, body, ct)
	}
	if code, body, _ := get(t, p2); code != 503 || body.LocalEndpoints != 0 || body.Service.Name != "b" {
		t.Errorf("b: %d %+v", code, body)
	}
	// a loses its endpoints, b goes away.
	if err := h.Set(map[uint16]HealthCheck{p1: {"ns", "a", 0}}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, p1); code != 503 || body.LocalEndpoints != 0 {
		t.Errorf("a without endpoints: %d %+v", code, body)
	}
	if code, _, msg := get(t, p2); code != -1 || !strings.Contains(msg, "refused") {
		t.Errorf("b after its Service went: %d %s", code, msg)
	}
	// A port somebody else holds: an error naming it, the other ports served anyway, and
	// the next Set tries it again.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bp := uint16(busy.Addr().(*net.TCPAddr).Port)
	err = h.Set(map[uint16]HealthCheck{p1: {"ns", "a", 1}, bp: {"ns", "c", 1}})
	if err == nil || !strings.Contains(err.Error(), "ns/c") {
		t.Errorf("busy port: %v", err)
	}
	if code, _, _ := get(t, p1); code != 200 {
		t.Errorf("a beside a busy port: %d", code)
	}
	busy.Close()
	if err := h.Set(map[uint16]HealthCheck{p1: {"ns", "a", 1}, bp: {"ns", "c", 1}}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, bp); code != 200 || body.Service.Name != "c" {
		t.Errorf("c once its port is free: %d %+v", code, body)
	}
	h.Close()
	if code, _, _ := get(t, p1); code != -1 {
		t.Errorf("a after Close: %d", code)
	}
}
