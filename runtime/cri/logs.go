package cri

import (
	"context"
	"io"

	"google.golang.org/grpc"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// StatusClient is the one RuntimeService call ReadLogs makes: ContainerStatus (a
// runtimeapi.RuntimeServiceClient has it).
type StatusClient interface {
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
}

// ReadLogs copies the container log file at path (the CRI "container logs" format, or Docker's JSON
// lines) to stdout and stderr with k8s.io/cri-client's reader, the kubelet's: opts selects the tail
// lines, byte limit, start time, timestamps and follow. A nil stdout or stderr drops that stream. While
// following, rt's ContainerStatus of containerID tells when the container stopped, which ends the read
// once the file is drained; a cancelled ctx ends it with an error.
func ReadLogs(ctx context.Context, path, containerID string, opts *logs.LogOptions, rt StatusClient, stdout, stderr io.Writer) error {
	return logs.ReadLogs(ctx, path, containerID, opts, statusOnly{rt: rt}, stdout, stderr)
}

// statusOnly gives logs.ReadLogs the one RuntimeService method it calls. The embedded interface is nil:
// any other method would panic, and ReadLogs (k8s.io/cri-client v0.37) calls none.
type statusOnly struct {
	internalapi.RuntimeService
	rt StatusClient
}

func (s statusOnly) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
}
