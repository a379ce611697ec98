package pleg

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers the list calls from its fields; other methods are not used by the PLEG.
type fakeRuntime struct {
	runtimeapi.RuntimeServiceClient
	mu   sync.Mutex
	sbs  []*runtimeapi.PodSandbox
	ctrs []*runtimeapi.Container
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListPodSandboxResponse{Items: f.sbs}, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: f.ctrs}, nil
}

func (f *fakeRuntime) GetContainerEvents(context.Context, *runtimeapi.GetEventsRequest, ...grpc.CallOption) (runtimeapi.RuntimeService_GetContainerEventsClient, error) {
	return nil, status.Error(codes.Unimplemented, "no events")
}

func drain(p *PLEG) []Event {
	var out []Event
	for {
		select {
		case e := <-p.Events():
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRelistEvents(t *testing.T) {
	f := &fakeRuntime{
		sbs:  []*runtimeapi.PodSandbox{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "pod1"}}},
		ctrs: []*runtimeapi.Container{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{"io.kubernetes.pod.uid": "pod1"}}},
	}
	p := New(f, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var relists []time.Duration
	p.OnRelist(func(d time.Duration) { relists = append(relists, d) })
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(relists) != 1 || relists[0] <= 0 {
		t.Errorf("relist durations observed: %v, want one positive", relists)
	}
	got := drain(p)
	if len(got) != 2 {
		t.Fatalf("first relist: %+v, want sandbox + container started", got)
	}
	if err := p.Relist(context.Background()); err != nil || len(drain(p)) != 0 {
		t.Fatalf("unchanged relist emitted events (err %v)", err)
	}
	f.mu.Lock()
	f.ctrs[0] = &runtimeapi.Container{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: map[string]string{"io.kubernetes.pod.uid": "pod1"}}
	f.mu.Unlock()
	_ = p.Relist(context.Background())
	if got := drain(p); len(got) != 1 || got[0] != (Event{PodUID: "pod1", Type: ContainerDied, ID: "c1"}) {
		t.Fatalf("exit: %+v", got)
	}
	f.mu.Lock()
	f.ctrs = nil
	f.mu.Unlock()
	_ = p.Relist(context.Background())
	if got := drain(p); len(got) != 1 || got[0].Type != ContainerRemoved {
		t.Fatalf("removal: %+v", got)
	}
	if ok, _ := p.Healthy(); !ok {
		t.Errorf("healthy after relists: false")
	}
	p.followEvents(context.Background()) // returns at once: Unimplemented
	if p.Evented() {
		t.Errorf("evented without a stream")
	}
}
