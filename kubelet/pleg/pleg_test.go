package pleg

import (
	"context"
	"io"
	"log/slog"
	"strings"
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
	mu         sync.Mutex
	sbs        []*runtimeapi.PodSandbox
	ctrs       []*runtimeapi.Container
	eventErrs  []error
	errAtRecv  bool
	eventCalls int
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

// GetContainerEvents answers the n-th call (counted in eventCalls) with eventErrs[n], the last one
// repeating, Unimplemented when eventErrs is empty; with errAtRecv the call succeeds and the stream's
// first Recv fails instead, as a real gRPC server stream does.
func (f *fakeRuntime) GetContainerEvents(context.Context, *runtimeapi.GetEventsRequest, ...grpc.CallOption) (runtimeapi.RuntimeService_GetContainerEventsClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := status.Error(codes.Unimplemented, "unknown method GetContainerEvents for service runtime.v1.RuntimeService")
	if len(f.eventErrs) > 0 {
		err = f.eventErrs[min(f.eventCalls, len(f.eventErrs)-1)]
	}
	f.eventCalls++
	if f.errAtRecv {
		return failingStream{err: err}, nil
	}
	return nil, err
}

func (f *fakeRuntime) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.eventCalls
}

type failingStream struct {
	grpc.ClientStream
	err error
}

func (s failingStream) Recv() (*runtimeapi.ContainerEventResponse, error) { return nil, s.err }

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

// TestUnimplementedEventsAskedOnce: against a runtime without container events (containerd 1.6), Run
// asks for the stream exactly once, says so in one Info line, and keeps relisting.
func TestUnimplementedEventsAskedOnce(t *testing.T) {
	for _, atRecv := range []bool{false, true} {
		f := &fakeRuntime{errAtRecv: atRecv}
		var logs strings.Builder // read after Run, which waits for followEvents
		p := New(f, 5*time.Millisecond, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		p.reconnect = time.Millisecond
		var mu sync.Mutex
		relists := 0
		p.OnRelist(func(time.Duration) { mu.Lock(); relists++; mu.Unlock() })
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		p.Run(ctx)
		cancel()
		mu.Lock()
		n := relists
		mu.Unlock()
		if n < 5 {
			t.Errorf("errAtRecv=%v: %d relists in 300ms at a 5ms period, want relisting to go on", atRecv, n)
		}
		if c := f.calls(); c != 1 {
			t.Errorf("errAtRecv=%v: GetContainerEvents called %d times, want 1 (containerd logs an error per call)", atRecv, c)
		}
		if c := strings.Count(logs.String(), "does not implement CRI container events"); c != 1 {
			t.Errorf("errAtRecv=%v: %d fallback lines, want 1:\n%s", atRecv, c, logs.String())
		}
		if p.Evented() {
			t.Errorf("errAtRecv=%v: Evented without a stream", atRecv)
		}
	}
}

// TestEventsReconnectUntilUnimplemented: transient errors (the runtime restarting) are retried after
// the reconnect pause; Unimplemented ends the retries.
func TestEventsReconnectUntilUnimplemented(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	f := &fakeRuntime{eventErrs: []error{unavailable, unavailable, status.Error(codes.Unimplemented, "no")}}
	p := New(f, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.reconnect = time.Millisecond
	done := make(chan struct{})
	go func() { p.followEvents(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("followEvents still retrying after Unimplemented")
	}
	if c := f.calls(); c != 3 {
		t.Errorf("GetContainerEvents called %d times, want 3 (two Unavailable retried, then Unimplemented)", c)
	}
}
