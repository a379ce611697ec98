package podautoscaler

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// Clients are what the controller reads and writes beyond its clientset.
type Clients struct {
	// Scales reads and updates /scale subresources of any group.
	Scales scale.ScalesGetter
	// Mapper maps a scale target's group and kind to its resources from discovery (cached, reset when a
	// kind is not found).
	Mapper Mapper
	// Metrics lists metrics.k8s.io/v1beta1 PodMetrics.
	Metrics metricsclient.PodMetricsesGetter
}

// NewClients builds the controller's clients on cfg, as kube-controller-manager does: a scale client
// over a discovery-based RESTMapper and scale kind resolver, and a metrics.k8s.io client.
func NewClients(cfg *rest.Config) (Clients, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("podautoscaler: discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		return Clients{}, fmt.Errorf("podautoscaler: scale client: %w", err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("podautoscaler: metrics client: %w", err)
	}
	return Clients{Scales: scales, Mapper: mapper, Metrics: metrics}, nil
}
