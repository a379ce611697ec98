// Package pleg is the Pod Lifecycle Event Generator: it tells the kubelet which pods changed in the
// runtime so their workers sync again. It relists the runtime's sandboxes and containers (CRI
// ListPodSandbox and ListContainers) every period and compares with the previous relist, and, where the
// runtime supports it, also follows the CRI GetContainerEvents stream so a change is seen at once instead
// of at the next relist (upstream's generic and evented PLEG, together). Like upstream's Evented PLEG, it
// asks for the stream once and, when the runtime answers Unimplemented (containerd 1.6), relists only and
// never asks again: containerd logs every refused call as an error.
package pleg

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// EventType names what changed, as upstream's PodLifeCycleEventType does.
type EventType string

// Event types.
const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
	SandboxChanged   EventType = "SandboxChanged"
)

// Event is one change of a pod's sandbox or container. ID is the CRI container or sandbox ID.
type Event struct {
	PodUID types.UID
	Type   EventType
	ID     string
}

// PLEG relists a CRI runtime and follows its container events.
type PLEG struct {
	runtime runtimeapi.RuntimeServiceClient
	period  time.Duration
	log     *slog.Logger
	events  chan Event
	// relistDone, when set, receives the duration of every relist (kubelet_pleg_relist_duration_seconds).
	relistDone func(time.Duration)
	// reconnect is the pause before asking for the event stream again after a transient error.
	reconnect time.Duration

	mu         sync.Mutex
	lastRelist time.Time
	evented    bool
	old        map[string]record // by container or sandbox ID
}

type record struct {
	pod     types.UID
	sandbox bool
	state   int32 // ContainerState or PodSandboxState
}

// New returns a PLEG over runtime that relists every period.
func New(runtime runtimeapi.RuntimeServiceClient, period time.Duration, log *slog.Logger) *PLEG {
	return &PLEG{runtime: runtime, period: period, log: log, events: make(chan Event, 1024), old: map[string]record{},
		reconnect: 5 * time.Second}
}

// OnRelist makes every later relist report its duration (successful or not) to observe, e.g.
// kubelet_pleg_relist_duration_seconds. Call it before Run.
func (p *PLEG) OnRelist(observe func(time.Duration)) { p.relistDone = observe }

// Events is the stream of lifecycle events; it is never closed. Events are dropped (with a log line)
// when nobody reads and 1024 are pending: the next relist or the periodic resync covers them.
func (p *PLEG) Events() <-chan Event { return p.events }

// Run relists until ctx ends, and follows CRI container events in parallel while the runtime offers them.
// It returns once both have stopped.
func (p *PLEG) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.followEvents(ctx) })
	t := time.NewTicker(p.period)
	defer t.Stop()
	for {
		if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("PLEG relist failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Healthy reports whether a relist succeeded within the last three minutes (upstream's "PLEG is not
// healthy" threshold), with the time of the last successful relist.
func (p *PLEG) Healthy() (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.lastRelist) < 3*time.Minute, p.lastRelist
}

// Evented reports whether the runtime's container event stream is being followed.
func (p *PLEG) Evented() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evented
}

// Relist lists the runtime once and emits an event for every sandbox or container that appeared,
// changed state or disappeared since the previous relist.
func (p *PLEG) Relist(ctx context.Context) error {
	if p.relistDone != nil {
		defer func(start time.Time) { p.relistDone(time.Since(start)) }(time.Now())
	}
	sbs, err := p.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	ctrs, err := p.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	cur := make(map[string]record, len(sbs.Items)+len(ctrs.Containers))
	for _, s := range sbs.Items {
		cur[s.Id] = record{pod: types.UID(s.GetMetadata().GetUid()), sandbox: true, state: int32(s.State)}
	}
	for _, c := range ctrs.Containers {
		cur[c.Id] = record{pod: types.UID(kubelettypes.GetPodUID(c.Labels)), state: int32(c.State)}
	}
	p.mu.Lock()
	old := p.old
	p.old = cur
	p.lastRelist = time.Now()
	p.mu.Unlock()
	for id, r := range cur {
		o, seen := old[id]
		if seen && o.state == r.state {
			continue
		}
		p.emit(Event{PodUID: r.pod, ID: id, Type: eventFor(r)})
	}
	for id, o := range old {
		if _, ok := cur[id]; !ok {
			t := ContainerRemoved
			if o.sandbox {
				t = SandboxChanged
			}
			p.emit(Event{PodUID: o.pod, ID: id, Type: t})
		}
	}
	return nil
}

func eventFor(r record) EventType {
	if r.sandbox {
		return SandboxChanged
	}
	switch runtimeapi.ContainerState(r.state) {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerStarted
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerDied
	}
	return ContainerChanged
}

func (p *PLEG) emit(e Event) {
	if e.PodUID == "" {
		return
	}
	select {
	case p.events <- e:
	default:
		p.log.Warn("PLEG event channel full, dropping event", "podUID", e.PodUID, "event", e.Type)
	}
}

// followEvents streams CRI container events (GetContainerEvents, CRI v1 "evented PLEG"). It reconnects
// after transient errors (the runtime restarting, a broken stream) every p.reconnect, and stops for good,
// with one Info line, when the runtime answers Unimplemented (containerd < 1.7), whether to the call or
// to the stream's first Recv: relisting alone then covers every change.
func (p *PLEG) followEvents(ctx context.Context) {
	for ctx.Err() == nil {
		stream, err := p.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
		if err == nil {
			err = p.consume(stream)
		}
		p.mu.Lock()
		p.evented = false
		p.mu.Unlock()
		if status.Code(err) == codes.Unimplemented {
			p.log.Info("runtime does not implement CRI container events (GetContainerEvents); PLEG relists only", "period", p.period.String())
			return
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.reconnect):
		}
	}
}

func (p *PLEG) consume(stream runtimeapi.RuntimeService_GetContainerEventsClient) error {
	first := true
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if first {
			first = false
			p.mu.Lock()
			p.evented = true
			p.mu.Unlock()
		}
		uid := types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid())
		var t EventType
		switch ev.ContainerEventType {
		case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
			t = ContainerStarted
		case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
			t = ContainerDied
		case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
			t = ContainerRemoved
		default:
			t = ContainerChanged
		}
		p.emit(Event{PodUID: uid, Type: t, ID: ev.ContainerId})
	}
}
