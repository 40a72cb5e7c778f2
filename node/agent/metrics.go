package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/node/cniserver"
	"github.com/ovn-transparent/ovn-transparent/node/ovs"
)

// cniBuckets (seconds) span a DEL of nothing (a millisecond) to an ADD that waits out its
// annotation and port installation timeouts.
var cniBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// nodeMetrics are the agent's figures. Labels name CNI commands and results, never a pod.
type nodeMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	collected prometheus.Counter
	installed prometheus.Histogram
	attached  prometheus.GaugeFunc
}

func newNodeMetrics(reg prometheus.Registerer, sw *ovs.Switch) (*nodeMetrics, error) {
	m := &nodeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovnt_node_cni_requests_total",
			Help: "CNI requests the agent answered, by command (ADD, DEL, CHECK, STATUS, GC) and result (ok, error).",
		}, []string{"command", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovnt_node_cni_request_duration_seconds",
			Help:    "Time the agent took to answer a CNI request, by command and result.",
			Buckets: cniBuckets,
		}, []string{"command", "result"}),
		collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ovnt_node_leaked_attachments_collected_total",
			Help: "Ports and interfaces of pods that are gone, removed by the leak collector (the runtime never sent their DEL or GC).",
		}),
		installed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ovnt_node_port_install_seconds",
			Help:    "Time ovn-controller took to install a new pod port's flows (the port written to br-int until it set ovn-installed), as CNI ADD waited for it; not on Windows, where ADD does not wait.",
			Buckets: cniBuckets,
		}),
		attached: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ovnt_node_pods_attached",
			Help: "Pod interfaces attached to the integration bridge.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ifaces, err := sw.InterfacesWith(ctx, cniserver.KeyPod)
			if err != nil {
				return -1
			}
			return float64(len(ifaces))
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.collected, m.installed, m.attached} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// instrument wraps the CNI handler h with the request counter and histogram.
func (m *nodeMetrics) instrument(h cni.Handler) cni.Handler {
	return func(ctx context.Context, req cni.Request) ([]byte, error) {
		start := time.Now()
		out, err := h(ctx, req)
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.requests.WithLabelValues(req.Command, result).Inc()
		m.duration.WithLabelValues(req.Command, result).Observe(time.Since(start).Seconds())
		return out, err
	}
}
