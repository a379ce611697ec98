package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodekit/nodekit/proxy/state"
)

// metrics are the proxy's Prometheus metrics, in a registry of its own (several Proxiers may share a process
// in tests).
type metrics struct {
	reg          *prometheus.Registry
	syncDuration prometheus.Histogram
	lastSync     prometheus.Gauge
	syncErrors   prometheus.Counter
	rules        *prometheus.GaugeVec
	servicePorts prometheus.Gauge
	problems     *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodekit_proxy_sync_duration_seconds",
			Help:    "Time one sync took: computing the desired state and writing it to the kernel.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodekit_proxy_last_sync_timestamp_seconds",
			Help: "Unix time the last successful sync finished.",
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodekit_proxy_sync_errors_total",
			Help: "Syncs that failed to write the kernel state.",
		}),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodekit_proxy_rules",
			Help: "Rules nodekit owns after the last sync, by kind (iptables table, or IPVS virtual/real servers).",
		}, []string{"kind"}),
		servicePorts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodekit_proxy_service_ports",
			Help: "Service ports proxied in the last sync.",
		}),
		problems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodekit_proxy_service_problems",
			Help: "1 for each Service (port) skipped or rejected because it is invalid; see the log for the reason.",
		}, []string{"service", "port"}),
	}
	m.reg.MustRegister(m.syncDuration, m.lastSync, m.syncErrors, m.rules, m.servicePorts, m.problems)
	return m
}

func (m *metrics) observeSync(took time.Duration, at time.Time, rules map[string]int, ports int) {
	m.syncDuration.Observe(took.Seconds())
	m.lastSync.Set(float64(at.UnixNano()) / 1e9)
	for k, n := range rules {
		m.rules.WithLabelValues(k).Set(float64(n))
	}
	m.servicePorts.Set(float64(ports))
}

func (m *metrics) setProblems(probs []state.Problem) {
	m.problems.Reset()
	for _, p := range probs {
		m.problems.WithLabelValues(p.Service.String(), p.Port).Set(1)
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
