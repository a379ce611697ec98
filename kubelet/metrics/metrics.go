// Package metrics holds the kubelet's Prometheus metrics, named as upstream's kubelet names them
// (k8s.io/kubernetes pkg/kubelet/metrics, subsystem "kubelet"), in a registry the kubelet server exposes
// on /metrics. The kubelet records pod start and pod worker durations, the PLEG its relist duration,
// and the CRI clients wrapped by InstrumentRuntime/InstrumentImages the runtime operations; the running pod
// and container gauges are computed from the CRI at scrape time, so they always reflect the runtime.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeLister is the part of the CRI RuntimeService the scrape-time gauges read;
// runtimeapi.RuntimeServiceClient satisfies it.
type RuntimeLister interface {
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
}

// Metrics is the kubelet's metric set. All fields are registered in Registry by New.
type Metrics struct {
	// Registry is what /metrics serves (Go and process collectors included).
	Registry *prometheus.Registry

	// PodStartDuration is kubelet_pod_start_duration_seconds: seconds from the kubelet first seeing a
	// pod (its creation as observed by the kubelet) to all its containers running (observed once per
	// pod; pods already running when first seen, e.g. adopted after a restart, are not observed).
	PodStartDuration prometheus.Histogram
	// PodWorkerDuration is kubelet_pod_worker_duration_seconds{operation_type=create|update|sync}:
	// seconds one pod worker sync took.
	PodWorkerDuration *prometheus.HistogramVec
	// RuntimeOperations, RuntimeOperationsErrors and RuntimeOperationsDuration are
	// kubelet_runtime_operations_total, kubelet_runtime_operations_errors_total and
	// kubelet_runtime_operations_duration_seconds, each by operation_type (the CRI method, e.g.
	// "run_podsandbox", "create_container").
	RuntimeOperations         *prometheus.CounterVec
	RuntimeOperationsErrors   *prometheus.CounterVec
	RuntimeOperationsDuration *prometheus.HistogramVec
	// PLEGRelistDuration is kubelet_pleg_relist_duration_seconds.
	PLEGRelistDuration prometheus.Histogram
	// NodeName is kubelet_node_name{node}: always 1.
	NodeName *prometheus.GaugeVec
}

// Upstream's bucket layouts.
var (
	podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// New creates the metric set and registers it, the Go and process collectors, and (when runtime is
// not nil) the scrape-time gauges kubelet_running_pods and kubelet_running_containers{container_state}
// computed from the runtime's sandboxes and containers.
func New(nodeName string, runtime RuntimeLister) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		PodStartDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartBuckets,
		}),
		PodWorkerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help: "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", Buckets: durationBuckets,
		}, []string{"operation_type"}),
		RuntimeOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		RuntimeOperationsErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		RuntimeOperationsDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "runtime_operations_duration_seconds",
			Help: "Duration in seconds of runtime operations. Broken down by operation type.", Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
		PLEGRelistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: durationBuckets,
		}),
		NodeName: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "node_name", Help: "The node's name. The count is always 1.",
		}, []string{"node"}),
	}
	m.NodeName.WithLabelValues(nodeName).Set(1)
	m.Registry.MustRegister(m.PodStartDuration, m.PodWorkerDuration, m.RuntimeOperations,
		m.RuntimeOperationsErrors, m.RuntimeOperationsDuration, m.PLEGRelistDuration, m.NodeName,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if runtime != nil {
		m.Registry.MustRegister(&runtimeCollector{runtime: runtime})
	}
	return m
}

// ObserveRuntimeOperation records one CRI call: its count, its duration and, when err is not nil, an
// error. operation is upstream's operation_type label value, e.g. "run_podsandbox".
func (m *Metrics) ObserveRuntimeOperation(operation string, start time.Time, err error) {
	m.RuntimeOperations.WithLabelValues(operation).Inc()
	m.RuntimeOperationsDuration.WithLabelValues(operation).Observe(time.Since(start).Seconds())
	if err != nil {
		m.RuntimeOperationsErrors.WithLabelValues(operation).Inc()
	}
}

var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running", []string{"container_state"}, nil)
)

// runtimeCollector computes kubelet_running_pods and kubelet_running_containers from the CRI.
type runtimeCollector struct{ runtime RuntimeLister }

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sb, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runningPodsDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(len(sb.GetItems())))
	}
	cs, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runningContainersDesc, err)
		return
	}
	counts := map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}
	for _, ctr := range cs.GetContainers() {
		switch ctr.GetState() {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			counts["created"]++
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			counts["running"]++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			counts["exited"]++
		default:
			counts["unknown"]++
		}
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
