package kuberuntime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// blockingSandboxes lists two sandboxes; its RunPodSandbox blocks until release is closed.
type blockingSandboxes struct {
	runtimeapi.RuntimeServiceClient
	entered, release chan struct{}
}

func (b *blockingSandboxes) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{Id: "sb-ready", State: runtimeapi.PodSandboxState_SANDBOX_READY},
		{Id: "sb-notready", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}}, nil
}

func (b *blockingSandboxes) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	close(b.entered)
	<-b.release
	return nil, errors.New("fake runtime: no sandboxes made here")
}

// TestNetworkGCNeverRacesSandboxCreation: while a RunPodSandbox is in flight NetworkGC does not call
// its collector (the sandbox being made is not listed yet); once it returned, the collector gets every
// listed sandbox, ready or not.
func TestNetworkGCNeverRacesSandboxCreation(t *testing.T) {
	rt := &blockingSandboxes{entered: make(chan struct{}), release: make(chan struct{})}
	m := &Manager{opts: Options{Runtime: rt, Helper: dnsHelper{}, PodLogsDir: t.TempDir()},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	done := make(chan struct{})
	go func() { defer close(done); _, _, _ = m.createSandbox(context.Background(), pod, 0) }()
	<-rt.entered
	var got []string
	gc := func(_ context.Context, ids []string) error { got = ids; return nil }
	if ran, err := m.NetworkGC(context.Background(), gc); ran || err != nil || got != nil {
		t.Fatalf("NetworkGC during RunPodSandbox: ran=%v err=%v ids=%v; want it deferred", ran, err, got)
	}
	close(rt.release)
	<-done
	if ran, err := m.NetworkGC(context.Background(), gc); !ran || err != nil {
		t.Fatalf("NetworkGC after RunPodSandbox: ran=%v err=%v", ran, err)
	}
	if want := []string{"sb-ready", "sb-notready"}; !reflect.DeepEqual(got, want) {
		t.Errorf("collector got %v, want %v", got, want)
	}
}
