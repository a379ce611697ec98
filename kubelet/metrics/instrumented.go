package metrics

import (
	"context"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// InstrumentRuntime wraps a CRI RuntimeService client so that each call the kubelet makes on its pod
// path is counted and timed in kubelet_runtime_operations_total, _errors_total and _duration_seconds
// under upstream's operation_type names (pkg/kubelet/kuberuntime/instrumented_services.go). Calls not
// listed below pass through uncounted. m nil returns rs unchanged.
func (m *Metrics) InstrumentRuntime(rs runtimeapi.RuntimeServiceClient) runtimeapi.RuntimeServiceClient {
	if m == nil || rs == nil {
		return rs
	}
	return &instrumentedRuntime{RuntimeServiceClient: rs, m: m}
}

// InstrumentImages is InstrumentRuntime for the CRI ImageService (pull_image, image_status,
// list_images, remove_image).
func (m *Metrics) InstrumentImages(is runtimeapi.ImageServiceClient) runtimeapi.ImageServiceClient {
	if m == nil || is == nil {
		return is
	}
	return &instrumentedImages{ImageServiceClient: is, m: m}
}

// observe runs call and records it under operation.
func observe[T any](m *Metrics, operation string, call func() (T, error)) (T, error) {
	start := time.Now()
	out, err := call()
	m.ObserveRuntimeOperation(operation, start, err)
	return out, err
}

type instrumentedRuntime struct {
	runtimeapi.RuntimeServiceClient
	m *Metrics
}

func (r *instrumentedRuntime) Version(ctx context.Context, in *runtimeapi.VersionRequest, o ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	return observe(r.m, "version", func() (*runtimeapi.VersionResponse, error) { return r.RuntimeServiceClient.Version(ctx, in, o...) })
}

func (r *instrumentedRuntime) Status(ctx context.Context, in *runtimeapi.StatusRequest, o ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	return observe(r.m, "status", func() (*runtimeapi.StatusResponse, error) { return r.RuntimeServiceClient.Status(ctx, in, o...) })
}

func (r *instrumentedRuntime) RunPodSandbox(ctx context.Context, in *runtimeapi.RunPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	return observe(r.m, "run_podsandbox", func() (*runtimeapi.RunPodSandboxResponse, error) {
		return r.RuntimeServiceClient.RunPodSandbox(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) StopPodSandbox(ctx context.Context, in *runtimeapi.StopPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	return observe(r.m, "stop_podsandbox", func() (*runtimeapi.StopPodSandboxResponse, error) {
		return r.RuntimeServiceClient.StopPodSandbox(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) RemovePodSandbox(ctx context.Context, in *runtimeapi.RemovePodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	return observe(r.m, "remove_podsandbox", func() (*runtimeapi.RemovePodSandboxResponse, error) {
		return r.RuntimeServiceClient.RemovePodSandbox(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) PodSandboxStatus(ctx context.Context, in *runtimeapi.PodSandboxStatusRequest, o ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error) {
	return observe(r.m, "podsandbox_status", func() (*runtimeapi.PodSandboxStatusResponse, error) {
		return r.RuntimeServiceClient.PodSandboxStatus(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return observe(r.m, "list_podsandbox", func() (*runtimeapi.ListPodSandboxResponse, error) {
		return r.RuntimeServiceClient.ListPodSandbox(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) CreateContainer(ctx context.Context, in *runtimeapi.CreateContainerRequest, o ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	return observe(r.m, "create_container", func() (*runtimeapi.CreateContainerResponse, error) {
		return r.RuntimeServiceClient.CreateContainer(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) StartContainer(ctx context.Context, in *runtimeapi.StartContainerRequest, o ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error) {
	return observe(r.m, "start_container", func() (*runtimeapi.StartContainerResponse, error) {
		return r.RuntimeServiceClient.StartContainer(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) StopContainer(ctx context.Context, in *runtimeapi.StopContainerRequest, o ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	return observe(r.m, "stop_container", func() (*runtimeapi.StopContainerResponse, error) {
		return r.RuntimeServiceClient.StopContainer(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, o ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	return observe(r.m, "remove_container", func() (*runtimeapi.RemoveContainerResponse, error) {
		return r.RuntimeServiceClient.RemoveContainer(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, o ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return observe(r.m, "list_containers", func() (*runtimeapi.ListContainersResponse, error) {
		return r.RuntimeServiceClient.ListContainers(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, o ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return observe(r.m, "container_status", func() (*runtimeapi.ContainerStatusResponse, error) {
		return r.RuntimeServiceClient.ContainerStatus(ctx, in, o...)
	})
}

func (r *instrumentedRuntime) ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, o ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	return observe(r.m, "exec_sync", func() (*runtimeapi.ExecSyncResponse, error) { return r.RuntimeServiceClient.ExecSync(ctx, in, o...) })
}

type instrumentedImages struct {
	runtimeapi.ImageServiceClient
	m *Metrics
}

func (i *instrumentedImages) PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, o ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	return observe(i.m, "pull_image", func() (*runtimeapi.PullImageResponse, error) { return i.ImageServiceClient.PullImage(ctx, in, o...) })
}

func (i *instrumentedImages) ImageStatus(ctx context.Context, in *runtimeapi.ImageStatusRequest, o ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	return observe(i.m, "image_status", func() (*runtimeapi.ImageStatusResponse, error) {
		return i.ImageServiceClient.ImageStatus(ctx, in, o...)
	})
}

func (i *instrumentedImages) ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, o ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	return observe(i.m, "list_images", func() (*runtimeapi.ListImagesResponse, error) { return i.ImageServiceClient.ListImages(ctx, in, o...) })
}

func (i *instrumentedImages) RemoveImage(ctx context.Context, in *runtimeapi.RemoveImageRequest, o ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	return observe(i.m, "remove_image", func() (*runtimeapi.RemoveImageResponse, error) {
		return i.ImageServiceClient.RemoveImage(ctx, in, o...)
	})
}
