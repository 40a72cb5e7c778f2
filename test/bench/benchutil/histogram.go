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
	fams, err := scrape(url)
	if err != nil {
		return Histogram{}, err
	}
	h, ok := histogramOf(fams, name, labels)
	if !ok {
		return Histogram{}, fmt.Errorf("%s: no series of %s with labels %v", url, name, labels)
	}
	return h, nil
}

// scrape reads the metric families of the /metrics page at url.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return fams, nil
}

// histogramOf finds the series of histogram name whose labels include labels.
func histogramOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (Histogram, bool) {
	for _, m := range fams[name].GetMetric() {
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
		return h, true
	}
	return Histogram{}, false
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

// The master's histograms (docs/operations.md): its own share of a change, from the first
// event of a key to its sync's committed NB transaction; one sync of a key; one NB
// transaction, of any kind of key.
const (
	EventToNB = "ovnt_master_event_to_nb_seconds"
	SyncTime  = "ovnt_master_sync_duration_seconds"
	TxnTime   = "ovnt_master_nb_transaction_duration_seconds"
)

// Master is what a master's histograms say about the syncs of one kind of key. A series
// the master has not observed anything in yet is empty.
type Master struct {
	Kind                 string
	EventToNB, Sync, Txn Histogram
}

// ScrapeMaster reads the master's histograms of kind from its /metrics page at url.
func ScrapeMaster(url, kind string) (Master, error) {
	fams, err := scrape(url)
	if err != nil {
		return Master{}, err
	}
	m := Master{Kind: kind}
	m.EventToNB, _ = histogramOf(fams, EventToNB, map[string]string{"kind": kind})
	m.Sync, _ = histogramOf(fams, SyncTime, map[string]string{"kind": kind})
	m.Txn, _ = histogramOf(fams, TxnTime, nil)
	return m, nil
}

// MasterShare scrapes the master at url again and describes what it observed since before
// (a ScrapeMaster of the same kind): the changes' count, p50, p99 and the bound of the
// largest, then the p50 and p99 of the syncs (those that changed nothing included) and of
// the NB transactions meanwhile.
func MasterShare(url string, before Master) string {
	now, err := ScrapeMaster(url, before.Kind)
	if err != nil {
		return "master's own share: " + err.Error()
	}
	what := fmt.Sprintf("master's own event -> NB committed (its %s, kind %s)", EventToNB, before.Kind)
	d := now.EventToNB.Since(before.EventToNB)
	if d.Count() == 0 {
		return what + ": no sync committed a change"
	}
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }
	sync, txn := now.Sync.Since(before.Sync), now.Txn.Since(before.Txn)
	return fmt.Sprintf("%s: %d changes, p50 %s, p99 %s, max <= %s; syncs (%d) p50 %s, p99 %s; NB transactions (%d) p50 %s, p99 %s",
		what, d.Count(), ms(d.Quantile(0.5)), ms(d.Quantile(0.99)), ms(d.MaxBound()),
		sync.Count(), ms(sync.Quantile(0.5)), ms(sync.Quantile(0.99)), txn.Count(), ms(txn.Quantile(0.5)), ms(txn.Quantile(0.99)))
}
