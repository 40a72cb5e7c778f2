package benchutil

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const page = `# HELP ovnt_master_event_to_nb_seconds x
# TYPE ovnt_master_event_to_nb_seconds histogram
ovnt_master_event_to_nb_seconds_bucket{kind="Pod",le="0.01"} 0
ovnt_master_event_to_nb_seconds_bucket{kind="Pod",le="0.1"} 9
ovnt_master_event_to_nb_seconds_bucket{kind="Pod",le="1"} 9
ovnt_master_event_to_nb_seconds_bucket{kind="Pod",le="+Inf"} 9
ovnt_master_event_to_nb_seconds_sum{kind="Pod"} 0.3
ovnt_master_event_to_nb_seconds_count{kind="Pod"} 9
ovnt_master_event_to_nb_seconds_bucket{kind="Service",le="0.01"} %d
ovnt_master_event_to_nb_seconds_bucket{kind="Service",le="0.1"} %d
ovnt_master_event_to_nb_seconds_bucket{kind="Service",le="1"} %d
ovnt_master_event_to_nb_seconds_bucket{kind="Service",le="+Inf"} %d
ovnt_master_event_to_nb_seconds_sum{kind="Service"} 1
ovnt_master_event_to_nb_seconds_count{kind="Service"} %d
`

func TestHistogram(t *testing.T) {
	counts := []any{10, 10, 10, 10, 10}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, page, counts...)
	}))
	defer srv.Close()
	svc := map[string]string{"kind": "Service"}
	before, err := ScrapeHistogram(srv.URL, "ovnt_master_event_to_nb_seconds", svc)
	if err != nil {
		t.Fatal(err)
	}
	// 100 more: 50 up to 10 ms, 49 between 10 and 100 ms, 1 between 0.1 and 1 s.
	counts = []any{60, 109, 110, 110, 110}
	after, err := ScrapeHistogram(srv.URL, "ovnt_master_event_to_nb_seconds", svc)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Since(before)
	if d.Count() != 100 {
		t.Fatalf("%d observations since, want 100", d.Count())
	}
	if got := d.Quantile(0.5); math.Abs(got-0.01) > 1e-9 {
		t.Errorf("p50 %v, want 0.01 (the 50th of 100 is the last of the first bucket)", got)
	}
	if got := d.Quantile(0.99); math.Abs(got-0.1) > 1e-9 {
		t.Errorf("p99 %v, want 0.1", got)
	}
	if got := d.MaxBound(); got != 1 {
		t.Errorf("max bound %v, want 1", got)
	}
	if _, err := ScrapeHistogram(srv.URL, "ovnt_master_event_to_nb_seconds", map[string]string{"kind": "Node"}); err == nil {
		t.Error("a series that is not there was found")
	}
	if q := (Histogram{}).Quantile(0.5); !math.IsNaN(q) {
		t.Errorf("quantile of nothing: %v", q)
	}
	// The master's figures: a page with nothing of a kind yet reads as empty histograms;
	// nothing since is said in words, not as NaN milliseconds.
	counts = []any{10, 10, 10, 10, 10}
	m0, err := ScrapeMaster(srv.URL, "Service")
	if err != nil {
		t.Fatal(err)
	}
	if got := MasterShare(srv.URL, m0); !strings.HasSuffix(got, "no sync committed a change") {
		t.Errorf("MasterShare with nothing new: %q", got)
	}
	counts = []any{60, 109, 110, 110, 110}
	if got := MasterShare(srv.URL, m0); !strings.Contains(got, "100 changes, p50 10.0 ms, p99 100.0 ms, max <= 1000.0 ms") {
		t.Errorf("MasterShare: %q", got)
	}
	if m, err := ScrapeMaster(srv.URL, "Node"); err != nil || m.EventToNB.Count() != 0 || m.Sync.Count() != 0 {
		t.Errorf("a kind with no series: %+v, %v", m, err)
	}
}
