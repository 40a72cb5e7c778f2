package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// latencyBuckets (seconds) span a sync that commits at once on an idle master (a few
// milliseconds) to a key that waited out a start-up or a backlog (a minute).
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics are the master's own figures. They are always kept; RegisterMetrics exposes them.
// Labels name kinds of keys and NB tables, never an object: a pod's name or address would
// make one series per pod.
type metrics struct {
	syncs      *prometheus.CounterVec
	eventToNB  *prometheus.HistogramVec
	syncTime   *prometheus.HistogramVec
	txnTime    prometheus.Histogram
	txns       *prometheus.CounterVec
	ops        *prometheus.CounterVec
	startup    *prometheus.GaugeVec
	queueDepth prometheus.GaugeFunc
	leader     prometheus.GaugeFunc
	podAddrs   *prometheus.Desc
	subnets    *prometheus.Desc
	c          *Controller

	// committed holds the keys whose sync in progress committed NB changes (a sync that
	// found the NB right changes nothing, and is no change's latency).
	committed sync.Map // nb.Key -> struct{}
}

func newMetrics(c *Controller) *metrics {
	return &metrics{
		c: c,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovnt_master_syncs_total",
			Help: "Syncs of one key by the work queue, by key kind and result (ok: NB changes committed, unchanged: the NB was right, error: retried, waiting: retried once what it waits for exists).",
		}, []string{"kind", "result"}),
		eventToNB: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovnt_master_event_to_nb_seconds",
			Help:    "Time from the first event of a key (an API object change, an NB change, a resync) to the end of the sync that converged it by committing NB changes, by key kind; syncs that found the NB right are not counted.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
		syncTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovnt_master_sync_duration_seconds",
			Help:    "Time one sync of a key took (desired state, diff, NB transaction), by key kind.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
		txnTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ovnt_master_nb_transaction_duration_seconds",
			Help:    "Time from sending an NB transaction to its reply.",
			Buckets: latencyBuckets,
		}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovnt_master_nb_transactions_total",
			Help: "NB transactions sent by the work queue's syncs, by result (ok, error).",
		}, []string{"result"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovnt_master_nb_operations_total",
			Help: "Operations in the NB transactions of the work queue's syncs, by table and operation (insert, update, mutate, delete), whatever the transaction's result.",
		}, []string{"table", "op"}),
		startup: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ovnt_master_startup_batch_seconds",
			Help: "Time the start-up batch took for each key kind at the last start (or leadership).",
		}, []string{"kind"}),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ovnt_master_queue_depth",
			Help: "Keys waiting in the work queue.",
		}, func() float64 { return float64(c.queue.Len()) }),
		leader: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ovnt_master_leader",
			Help: "1 while this master leads (writes the NB), 0 while it stands by.",
		}, func() float64 {
			if c.leading.Load() {
				return 1
			}
			return 0
		}),
		podAddrs: prometheus.NewDesc("ovnt_master_ipam_pod_addresses",
			"Pod addresses of each node subnet, by node and state (used, free).", []string{"node", "state"}, nil),
		subnets: prometheus.NewDesc("ovnt_master_ipam_node_subnets",
			"Node subnets of the cluster CIDR, by state (used, free).", []string{"state"}, nil),
	}
}

// Describe and Collect make the IPAM figures a collector: read when scraped.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.podAddrs
	ch <- m.subnets
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for node, u := range m.c.ipam.PodAddressUsage() {
		ch <- prometheus.MustNewConstMetric(m.podAddrs, prometheus.GaugeValue, float64(u.Used), node, "used")
		ch <- prometheus.MustNewConstMetric(m.podAddrs, prometheus.GaugeValue, float64(u.Free), node, "free")
	}
	u := m.c.ipam.SubnetUsage()
	ch <- prometheus.MustNewConstMetric(m.subnets, prometheus.GaugeValue, float64(u.Used), "used")
	ch <- prometheus.MustNewConstMetric(m.subnets, prometheus.GaugeValue, float64(u.Free), "free")
}

// observe is the work queue's Observe: what one sync of key did.
func (m *metrics) observe(key any, waited, took time.Duration, err error) {
	k, ok := key.(nb.Key)
	if !ok {
		return
	}
	kind := string(k.Kind)
	var w reconcile.Waiting
	switch {
	case err == nil:
		if _, wrote := m.committed.LoadAndDelete(k); !wrote {
			m.syncs.WithLabelValues(kind, "unchanged").Inc()
			break
		}
		m.syncs.WithLabelValues(kind, "ok").Inc()
		m.eventToNB.WithLabelValues(kind).Observe(waited.Seconds())
	case errors.As(err, &w):
		m.syncs.WithLabelValues(kind, "waiting").Inc()
	default:
		m.syncs.WithLabelValues(kind, "error").Inc()
	}
	m.syncTime.WithLabelValues(kind).Observe(took.Seconds())
}

// startupDone records how long the start-up batch of kind took.
func (m *metrics) startupDone(kind nb.Kind, took time.Duration) {
	if m == nil { // a Controller made by hand in a test
		return
	}
	m.startup.WithLabelValues(string(kind)).Set(took.Seconds())
}

// wrote records that the sync of key, the work queue's key whose sync this is, committed NB
// changes (its own rows or those of a key it synced inline).
func (m *metrics) wrote(key nb.Key) {
	if m != nil {
		m.committed.Store(key, struct{}{})
	}
}

// transaction counts one NB transaction of a sync.
func (m *metrics) transaction(ops []libovsdb.Operation, took time.Duration, err error) {
	if m == nil || len(ops) == 0 {
		return
	}
	m.txnTime.Observe(took.Seconds())
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.txns.WithLabelValues(result).Inc()
	for _, op := range ops {
		m.ops.WithLabelValues(op.Table, op.Op).Inc()
	}
}

// RegisterMetrics exposes the master's metrics in reg.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	m := c.metrics
	for _, col := range []prometheus.Collector{m.syncs, m.eventToNB, m.syncTime, m.txnTime, m.txns, m.ops, m.startup, m.queueDepth, m.leader, m} {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("controller: metrics: %w", err)
		}
	}
	return nil
}

// Ready reports whether the master can do its job: the NB client is connected and, while it
// leads, its informers have synced. A standby master (not leading) is ready when its NB
// client is: it can take over.
func (c *Controller) Ready() error {
	if c.nb.CurrentEndpoint() == "" {
		return errors.New("not connected to the NB")
	}
	if !c.leading.Load() {
		return nil
	}
	for _, synced := range c.synced {
		if !synced() {
			return errors.New("informers not synced yet")
		}
	}
	return nil
}

// Live reports an error when the work queue's workers are stuck: keys wait and no sync has
// ended for several sync timeouts.
func (c *Controller) Live() error { return c.queue.Stalled(5 * c.syncTimeout) }
