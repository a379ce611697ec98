package crictl

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is an in-memory RuntimeService for the verb tests: it serves ListPodSandbox,
// ListContainers (id, pod and state filters), ContainerStatus and ExecSync; any other call panics on the
// nil embedded client.
type fakeRuntime struct {
	runtimeapi.RuntimeServiceClient

	mu     sync.Mutex
	pods   []*runtimeapi.PodSandbox
	ctrs   []*runtimeapi.Container
	status map[string]*runtimeapi.ContainerStatus // by container ID
	exec   *runtimeapi.ExecSyncResponse
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListPodSandboxResponse{Items: f.pods}, nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	flt := in.GetFilter()
	var out []*runtimeapi.Container
	for _, c := range f.ctrs {
		if (flt.GetId() == "" || c.GetId() == flt.GetId()) && (flt.GetPodSandboxId() == "" || c.GetPodSandboxId() == flt.GetPodSandboxId()) &&
			(flt.GetState() == nil || c.GetState() == flt.GetState().GetState()) {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.status[in.GetContainerId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", in.GetContainerId())
	}
	return &runtimeapi.ContainerStatusResponse{Status: s}, nil
}

func (f *fakeRuntime) ExecSync(context.Context, *runtimeapi.ExecSyncRequest, ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	return f.exec, nil
}

// setState changes a container's state as ContainerStatus reports it.
func (f *fakeRuntime) setState(id string, s runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[id].State = s
}
