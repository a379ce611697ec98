package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type lister struct{ err error }

func (l lister) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "a"}, {Id: "b"}}}, l.err
}

func (l lister) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, {State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{State: runtimeapi.ContainerState_CONTAINER_EXITED},
	}}, l.err
}

func TestMetrics(t *testing.T) {
	m := New("n1", lister{})
	m.ObserveRuntimeOperation("run_podsandbox", time.Now(), nil)
	m.ObserveRuntimeOperation("run_podsandbox", time.Now(), errors.New("boom"))
	m.PodStartDuration.Observe(1.5)
	want := `
# HELP kubelet_running_containers Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 0
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 2
kubelet_running_containers{container_state="unknown"} 0
# HELP kubelet_running_pods Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 2
# HELP kubelet_runtime_operations_errors_total Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="run_podsandbox"} 1
# HELP kubelet_runtime_operations_total Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="run_podsandbox"} 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "kubelet_running_containers", "kubelet_running_pods",
		"kubelet_runtime_operations_errors_total", "kubelet_runtime_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.PodStartDuration); n != 1 {
		t.Errorf("pod start histogram series = %d", n)
	}
	// A runtime that cannot be listed makes the scrape report the error instead of stale numbers.
	bad := New("n1", lister{err: errors.New("runtime not reachable")})
	if _, err := bad.Registry.Gather(); err == nil || !strings.Contains(err.Error(), "runtime not reachable") {
		t.Errorf("gather with a failing runtime: %v", err)
	}
}

// failingRuntime answers RunPodSandbox with an error and StopContainer with success.
type failingRuntime struct {
	runtimeapi.RuntimeServiceClient
}

func (failingRuntime) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	return nil, errors.New("no sandbox")
}

func (failingRuntime) StopContainer(context.Context, *runtimeapi.StopContainerRequest, ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, nil
}

func TestInstrumentRuntime(t *testing.T) {
	m := New("n1", nil)
	rs := m.InstrumentRuntime(failingRuntime{})
	if _, err := rs.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{}); err == nil || err.Error() != "no sandbox" {
		t.Fatalf("RunPodSandbox error passed through as %v", err)
	}
	for range 2 {
		if _, err := rs.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for op, want := range map[string][2]float64{"run_podsandbox": {1, 1}, "stop_container": {2, 0}} {
		if got := testutil.ToFloat64(m.RuntimeOperations.WithLabelValues(op)); got != want[0] {
			t.Errorf("runtime_operations_total{%s} = %v, want %v", op, got, want[0])
		}
		if got := testutil.ToFloat64(m.RuntimeOperationsErrors.WithLabelValues(op)); got != want[1] {
			t.Errorf("runtime_operations_errors_total{%s} = %v, want %v", op, got, want[1])
		}
	}
	var none *Metrics
	if got := none.InstrumentRuntime(failingRuntime{}); got != (failingRuntime{}) {
		t.Errorf("nil Metrics wrapped the runtime: %T", got)
	}
}
