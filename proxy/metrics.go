package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodekit/nodekit/proxy/state"
)

// metrics are the proxy's Prometheus metrics, in a registry of its own (several Proxiers may share a process
// in tests). Names, types, labels and buckets are kube-proxy's (k8s.io/kubernetes pkg/proxy/metrics,
// v1.37), so kube-proxy's dashboards and alerts work unchanged; nodekit's proxy is IPv4 only, so every
// ip_family label is "IPv4". kubeproxy_sync_proxy_rules_iptables_total counts the rules nodekit owns per
// table (nat, filter) in iptables and IPVS modes. Two metrics are nodekit's own, kube-proxy has none like
// them: nodekit_proxy_objects{kind} (what the nftables or IPVS backend owns after the last sync: chains,
// rules, elements; virtual and real servers) and nodekit_proxy_service_problems{service,port}.
type metrics struct {
	reg *prometheus.Registry

	syncDuration, syncFull, syncPartial *prometheus.HistogramVec
	networkProgramming                  *prometheus.HistogramVec
	lastSync, lastQueued                *prometheus.GaugeVec
	endpointChanges, serviceChanges     prometheus.Counter
	endpointPending, servicePending     prometheus.Gauge
	iptablesTotal                       *prometheus.GaugeVec
	iptablesRestoreFailures             *prometheus.CounterVec
	nftablesFailures                    *prometheus.CounterVec
	objects                             *prometheus.GaugeVec
	healthz, livez                      *prometheus.CounterVec
	problems                            *prometheus.GaugeVec
}

const ipFamily = "IPv4"

// syncBuckets are kube-proxy's sync-latency buckets: 1 ms to 16 s.
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

func networkProgrammingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...) // 0.25s, 0.5s
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)      // 1s … 59s
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)     // 60s … 115s
	return append(b, prometheus.LinearBuckets(120, 30, 7)...) // 2min … 5min
}

func newMetrics(mode Mode) *metrics {
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: name, Help: help, Buckets: buckets}, []string{"ip_family"})
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: name, Help: help}, labels)
	}
	objects := func(help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodekit_proxy_objects", Help: help}, []string{"kind"})
	}
	m := &metrics{
		reg:          prometheus.NewRegistry(),
		syncDuration: hist("sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds", syncBuckets),
		syncFull:     hist("sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs", syncBuckets),
		syncPartial:  hist("sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs", syncBuckets),
		networkProgramming: hist("network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds",
			networkProgrammingBuckets()),
		lastSync:   gauge("sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced", "ip_family"),
		lastQueued: gauge("sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of proxy rules was queued", "ip_family"),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		endpointPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		servicePending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		iptablesTotal: gauge("sync_proxy_rules_iptables_total", "Total number of iptables rules owned by kube-proxy", "table", "ip_family"),
		iptablesRestoreFailures: counter("sync_proxy_rules_iptables_restore_failures_total",
			"Cumulative proxy iptables restore failures", "ip_family"),
		nftablesFailures: counter("sync_proxy_rules_nftables_sync_failures_total", "Cumulative proxy nftables sync failures", "ip_family"),
		healthz:          counter("proxy_healthz_total", "Cumulative proxy healthz HTTP status", "code"),
		livez:            counter("proxy_livez_total", "Cumulative proxy livez HTTP status", "code"),
		problems: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodekit_proxy_service_problems",
			Help: "1 for each Service (port) skipped or rejected because it is invalid; see the log for the reason."}, []string{"service", "port"}),
	}
	m.reg.MustRegister(m.syncDuration, m.syncFull, m.syncPartial, m.networkProgramming, m.lastSync, m.lastQueued,
		m.endpointChanges, m.serviceChanges, m.endpointPending, m.servicePending, m.healthz, m.livez, m.problems)
	switch mode {
	case ModeIPTables:
		m.reg.MustRegister(m.iptablesTotal, m.iptablesRestoreFailures)
	case ModeNFTables:
		m.objects = objects("Objects of nodekit's nftables table after the last sync, by kind (chains, rules, elements).")
		m.reg.MustRegister(m.nftablesFailures, m.objects)
	case ModeIPVS:
		m.objects = objects("IPVS objects nodekit owns after the last sync, by kind.")
		m.reg.MustRegister(m.iptablesTotal, m.iptablesRestoreFailures, m.objects)
	}
	return m
}

// observeSync records a successful sync of the given duration that finished at at, with the rule counts the
// backend reported, and the network programming latency of each change it carried: from the time the
// change was seen (the informer event) to at.
func (m *metrics) observeSync(mode Mode, full bool, took time.Duration, at time.Time, rules map[string]int, changesSeen []time.Time) {
	m.syncDuration.WithLabelValues(ipFamily).Observe(took.Seconds())
	if full {
		m.syncFull.WithLabelValues(ipFamily).Observe(took.Seconds())
	} else {
		m.syncPartial.WithLabelValues(ipFamily).Observe(took.Seconds())
	}
	m.lastSync.WithLabelValues(ipFamily).Set(float64(at.UnixNano()) / 1e9)
	for _, seen := range changesSeen {
		m.networkProgramming.WithLabelValues(ipFamily).Observe(at.Sub(seen).Seconds())
	}
	for k, n := range rules {
		switch {
		case mode == ModeIPTables || (mode == ModeIPVS && (k == "nat" || k == "filter")):
			m.iptablesTotal.WithLabelValues(k, ipFamily).Set(float64(n))
		case m.objects != nil:
			m.objects.WithLabelValues(k).Set(float64(n))
		}
	}
	m.endpointPending.Set(0)
	m.servicePending.Set(0)
}

// syncFailed counts a failed sync in the mode's failure counter.
func (m *metrics) syncFailed(mode Mode) {
	switch mode {
	case ModeNFTables:
		m.nftablesFailures.WithLabelValues(ipFamily).Inc()
	default:
		m.iptablesRestoreFailures.WithLabelValues(ipFamily).Inc()
	}
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
