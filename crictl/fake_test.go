package crictl

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	// A copy: setState may change the stored status while the caller reads this one.
	return &runtimeapi.ContainerStatusResponse{Status: proto.CloneOf(s)}, nil
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

// fakeLifecycle extends fakeRuntime with the calls run, checkpoint and the runtime-configuration and
// metrics commands make, recording their requests. unimplemented makes CheckpointContainer,
// RuntimeConfig, UpdateRuntimeConfig and the metrics calls answer codes.Unimplemented, as containerd
// 1.6 does for some of them.
type fakeLifecycle struct {
	*fakeRuntime
	unimplemented bool

	runs       []*runtimeapi.RunPodSandboxRequest
	creates    []*runtimeapi.CreateContainerRequest
	starts     []string
	checkpoint []*runtimeapi.CheckpointContainerRequest
	updates    []*runtimeapi.UpdateRuntimeConfigRequest
	startErr   error
}

func (f *fakeLifecycle) unimpl(call string) error {
	if f.unimplemented {
		return status.Errorf(codes.Unimplemented, "method %s not implemented", call)
	}
	return nil
}

func (f *fakeLifecycle) RunPodSandbox(_ context.Context, in *runtimeapi.RunPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	f.runs = append(f.runs, in)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: fmt.Sprintf("%064d", len(f.runs))}, nil
}

func (f *fakeLifecycle) CreateContainer(_ context.Context, in *runtimeapi.CreateContainerRequest, _ ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	f.creates = append(f.creates, in)
	return &runtimeapi.CreateContainerResponse{ContainerId: fmt.Sprintf("c%063d", len(f.creates))}, nil
}

func (f *fakeLifecycle) StartContainer(_ context.Context, in *runtimeapi.StartContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error) {
	f.starts = append(f.starts, in.GetContainerId())
	return &runtimeapi.StartContainerResponse{}, f.startErr
}

func (f *fakeLifecycle) CheckpointContainer(_ context.Context, in *runtimeapi.CheckpointContainerRequest, _ ...grpc.CallOption) (*runtimeapi.CheckpointContainerResponse, error) {
	if err := f.unimpl("CheckpointContainer"); err != nil {
		return nil, err
	}
	f.checkpoint = append(f.checkpoint, in)
	return &runtimeapi.CheckpointContainerResponse{}, nil
}

func (f *fakeLifecycle) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest, ...grpc.CallOption) (*runtimeapi.RuntimeConfigResponse, error) {
	if err := f.unimpl("RuntimeConfig"); err != nil {
		return nil, err
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

func (f *fakeLifecycle) UpdateRuntimeConfig(_ context.Context, in *runtimeapi.UpdateRuntimeConfigRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if err := f.unimpl("UpdateRuntimeConfig"); err != nil {
		return nil, err
	}
	f.updates = append(f.updates, in)
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

func (f *fakeLifecycle) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	if err := f.unimpl("ListPodSandboxMetrics"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: []*runtimeapi.PodSandboxMetrics{{PodSandboxId: "p1",
		Metrics: []*runtimeapi.Metric{{Name: "container_cpu_usage_seconds_total", MetricType: runtimeapi.MetricType_COUNTER, Value: &runtimeapi.UInt64Value{Value: 7}}}}}}, nil
}

func (f *fakeLifecycle) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest, ...grpc.CallOption) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	if err := f.unimpl("ListMetricDescriptors"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListMetricDescriptorsResponse{Descriptors: []*runtimeapi.MetricDescriptor{{Name: "container_cpu_usage_seconds_total", Help: "CPU", LabelKeys: []string{"id"}}}}, nil
}

// fakeImages is an in-memory ImageService: ListImages, ImageStatus (by ID, tag or the repository of a
// tag) and PullImage, which records its requests.
type fakeImages struct {
	runtimeapi.ImageServiceClient
	images []*runtimeapi.Image
	pulls  []*runtimeapi.PullImageRequest
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ListImagesRequest, ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	// A copy, as a gRPC answer is: the verbs sort and filter it in place.
	return &runtimeapi.ListImagesResponse{Images: slices.Clone(f.images)}, nil
}

func (f *fakeImages) ImageStatus(_ context.Context, in *runtimeapi.ImageStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	for _, im := range f.images {
		if imageMatches(im, in.GetImage().GetImage()) {
			return &runtimeapi.ImageStatusResponse{Image: im}, nil
		}
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (f *fakeImages) PullImage(_ context.Context, in *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	f.pulls = append(f.pulls, in)
	return &runtimeapi.PullImageResponse{ImageRef: "sha256:" + in.GetImage().GetImage()}, nil
}
