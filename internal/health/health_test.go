package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestChecks(t *testing.T) {
	s := New()
	connected := false
	s.AddLiveness("loop", func() error { return nil })
	s.AddReadiness("nb", func() error {
		if !connected {
			return errors.New("not connected")
		}
		return nil
	})
	s.AddReadiness("informers", func() error { return nil })
	h := s.Handler()
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]nb: not connected") || !strings.Contains(body, "[+]informers ok") {
		t.Errorf("/readyz while not connected: %d %q", code, body)
	}
	connected = true
	if code, body := get(t, h, "/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz once connected: %d %q", code, body)
	}
}

func TestMetrics(t *testing.T) {
	s := New()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ovnt_test_things_total", Help: "Things."})
	s.Registry.MustRegister(c)
	c.Add(3)
	code, body := get(t, s.Handler(), "/metrics")
	if code != 200 || !strings.Contains(body, "ovnt_test_things_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, body without the counter or the Go collector:\n%s", code, body)
	}
}

func TestServe(t *testing.T) {
	s := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A port taken is an error at start, not a silent daemon without health.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(ctx, ln.Addr().String(), func(error) {}); err == nil {
		t.Error("Serve on a port in use did not fail")
	}
	ln.Close()
	if err := s.Serve(ctx, ln.Addr().String(), func(err error) { t.Error(err) }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("GET /healthz: %d %q", resp.StatusCode, b)
	}
	if err := s.Serve(ctx, "", nil); err != nil {
		t.Errorf("an empty address (disabled) failed: %v", err)
	}
}
