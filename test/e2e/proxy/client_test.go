package proxy_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/test/framework/apiserver"
)

// newClients starts a real control plane (embedded etcd + nodekit's API server) for the test and returns an
// admin client, through which the test writes Services and EndpointSlices (the EndpointSlice controller
// is not part of this test), and the client the proxy watches with: node1's own identity
// (system:node:node1), as when the agent runs the proxy in-process.
func newClients(t *testing.T) (admin, node kubernetes.Interface) {
	s := apiserver.Start(t, apiserver.Options{})
	return s.Client, s.NodeClient(t, "node1")
}

// prepareService leaves allocation (ClusterIP, NodePort when not set) to the API server.
func prepareService(t *testing.T, svc *v1.Service) {}
