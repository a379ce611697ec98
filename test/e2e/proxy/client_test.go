package proxy_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

var nextClusterIP atomic.Int32

// newClient returns the API client the tests write Services and EndpointSlices through.
func newClient(t *testing.T) kubernetes.Interface {
	return fake.NewClientset()
}

// prepareService fills what the API server would allocate: a ClusterIP in 10.96.0.0/16.
func prepareService(t *testing.T, svc *v1.Service) {
	if svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", 10+nextClusterIP.Add(1))
	}
}
