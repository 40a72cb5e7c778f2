package benchutil

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Histogram is one series of a Prometheus histogram as a /metrics page shows it: cumulative
// counts at each upper bound (the last bound is +Inf).
type Histogram struct {
	Bounds []float64
	Counts []uint64 // cumulative: Counts[i] observations were at most Bounds[i]
}

// ScrapeHistogram reads the series of histogram name whose labels include labels from the
// /metrics page at url.
func ScrapeHistogram(url, name string, labels map[string]string) (Histogram, error) {
	resp, err := http.Get(url)
	if err != nil {
		return Histogram{}, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return Histogram{}, fmt.Errorf("%s: %w", url, err)
	}
	fam, ok := fams[name]
	if !ok {
		return Histogram{}, fmt.Errorf("%s: no metric %s", url, name)
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) || m.GetHistogram() == nil {
			continue
		}
		var h Histogram
		for _, b := range m.GetHistogram().GetBucket() {
			h.Bounds = append(h.Bounds, b.GetUpperBound())
			h.Counts = append(h.Counts, b.GetCumulativeCount())
		}
		if len(h.Bounds) == 0 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
			h.Bounds = append(h.Bounds, math.Inf(1))
			h.Counts = append(h.Counts, m.GetHistogram().GetSampleCount())
		}
		return h, nil
	}
	return Histogram{}, fmt.Errorf("%s: no series of %s with labels %v", url, name, labels)
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Since is what h observed after earlier (the same series, scraped before).
func (h Histogram) Since(earlier Histogram) Histogram {
	out := Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}
	if slices.Equal(h.Bounds, earlier.Bounds) {
		for i := range out.Counts {
			out.Counts[i] -= earlier.Counts[i]
		}
	}
	return out
}

// Count is the number of observations.
func (h Histogram) Count() uint64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Quantile estimates the q-quantile (0 < q < 1) as Prometheus' histogram_quantile does:
// linearly within the bucket it falls in (from 0 for the first). It is the bucket's bound
// when it falls in the +Inf bucket, and NaN without observations.
func (h Histogram) Quantile(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return math.NaN()
	}
	rank := q * float64(n)
	lower, below := 0.0, uint64(0)
	for i, c := range h.Counts {
		if float64(c) >= rank {
			if math.IsInf(h.Bounds[i], 1) {
				return lower
			}
			inBucket := float64(c - below)
			if inBucket == 0 {
				return h.Bounds[i]
			}
			return lower + (h.Bounds[i]-lower)*(rank-float64(below))/inBucket
		}
		lower, below = h.Bounds[i], c
	}
	return lower
}

// MaxBound is the upper bound of the highest bucket with an observation: the largest
// observation was at most this (+Inf when it was above every finite bound).
func (h Histogram) MaxBound() float64 {
	for i := range h.Counts {
		if h.Counts[i] == h.Count() {
			return h.Bounds[i]
		}
	}
	return math.NaN()
}

// EventToNB is the name of the master's histogram of its own share of a change: from the
// first event of a key to its committed sync (docs/operations.md).
const EventToNB = "ovnt_master_event_to_nb_seconds"

// MasterShare scrapes the master's EventToNB series of kind at metricsURL and describes
// what it observed since before: count, p50, p99 and the bound of the largest.
func MasterShare(metricsURL, kind string, before Histogram) string {
	now, err := ScrapeHistogram(metricsURL, EventToNB, map[string]string{"kind": kind})
	if err != nil {
		return "master's own share: " + err.Error()
	}
	d := now.Since(before)
	if d.Count() == 0 {
		return fmt.Sprintf("master's own event -> NB committed (its %s histogram, kind %s): no sync committed a change", EventToNB, kind)
	}
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }
	return fmt.Sprintf("master's own event -> NB committed (its %s histogram, kind %s): %d syncs, p50 %s, p99 %s, max <= %s",
		EventToNB, kind, d.Count(), ms(d.Quantile(0.5)), ms(d.Quantile(0.99)), ms(d.MaxBound()))
}
