package apiserver_test

import (
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestMetricsDisabled starts the API server with metrics.k8s.io off (`--disable metrics`): the group is
// in neither discovery document and its paths answer 404.
func TestMetricsDisabled(t *testing.T) {
	s := fw.Start(t, fw.Options{DisableMetrics: true})
	groups, err := s.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == metricsv1beta1.GroupName }) {
		t.Errorf("discovery lists %s", metricsv1beta1.GroupName)
	}
	agg, _, err := s.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(agg, func(g *metav1.APIGroup) bool { return g.Name == metricsv1beta1.GroupName }) {
		t.Errorf("aggregated discovery lists %s", metricsv1beta1.GroupName)
	}
	_, err = metricsclient.NewForConfigOrDie(s.Config).MetricsV1beta1().NodeMetricses().List(ctxT(t), metav1.ListOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("list NodeMetrics: %v, want 404", err)
	}
}
