package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// PodFacts are the objects a pod's explanation is computed from. Pod is required; Events are the
// events whose involvedObject is the pod (other objects' events are ignored); Node is the node the pod
// is bound to (nil when unbound, not fetched, or not found: NodeNotFound tells the last apart); Logs maps a container name to the tail of its log (the
// previous instance's for a restarted container), fetched only for failing containers and optional;
// Now is the time the facts were read (durations such as "Terminating for 5m" are measured to it).
type PodFacts struct {
	Pod          *v1.Pod
	Events       []v1.Event
	Node         *v1.Node
	NodeNotFound bool
	Logs         map[string]string
	Now          time.Time
}

// eventTime is the latest time an event carries: lastTimestamp, then eventTime, then firstTimestamp.
func eventTime(e *v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.FirstTimestamp.Time
	}
}

// firstTime is when an event first happened.
func firstTime(e *v1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return eventTime(e)
}

// podEvents returns the pod's own events (by UID when both carry one, else by name), oldest first.
func (f PodFacts) podEvents() []v1.Event {
	var out []v1.Event
	for _, e := range f.Events {
		io := e.InvolvedObject
		if io.Kind != "" && io.Kind != "Pod" || io.Name != f.Pod.Name {
			continue
		}
		if io.UID != "" && f.Pod.UID != "" && io.UID != f.Pod.UID {
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out
}

// eventContainer is the container an event is about, from its fieldPath "spec.containers{name}".
func eventContainer(e *v1.Event) string {
	p := e.InvolvedObject.FieldPath
	if i := strings.IndexByte(p, '{'); i >= 0 && strings.HasSuffix(p, "}") {
		return p[i+1 : len(p)-1]
	}
	return ""
}

// lastEvent returns the latest of the pod's events with reason (and, when container is set, about
// that container) whose message contains substr, or nil.
func (f PodFacts) lastEvent(reason, container, substr string) *v1.Event {
	evs := f.podEvents()
	for i := len(evs) - 1; i >= 0; i-- {
		e := &evs[i]
		if e.Reason == reason && (container == "" || eventContainer(e) == "" || eventContainer(e) == container) && strings.Contains(e.Message, substr) {
			return e
		}
	}
	return nil
}

// PodTimeline returns the pod's path in time order: the API write, every event (scheduler and
// kubelet), the conditions, each container's state and last termination, the log tails, and the
// deletion when requested.
func PodTimeline(f PodFacts) []Step {
	p := f.Pod
	steps := []Step{{Time: p.CreationTimestamp.Time, Component: ComponentAPI, Step: "created", OK: true,
		Detail: fmt.Sprintf("uid=%s resourceVersion=%s", p.UID, p.ResourceVersion)}}
	for _, e := range f.podEvents() {
		detail := e.Message
		if e.Count > 1 {
			detail += fmt.Sprintf(" (x%d since %s)", e.Count, firstTime(&e).Format(time.TimeOnly))
		}
		comp := e.Source.Component
		if comp == "" {
			comp = e.ReportingController
		}
		switch {
		case comp == "default-scheduler" || strings.Contains(comp, "scheduler"):
			comp = ComponentScheduler
		case comp == "kubelet":
			comp = ComponentKubelet
		}
		if c := eventContainer(&e); c != "" {
			detail = "container " + c + ": " + detail
		}
		steps = append(steps, Step{Time: eventTime(&e), Component: comp, Step: e.Reason, Detail: detail, OK: e.Type != v1.EventTypeWarning})
	}
	if p.Spec.NodeName != "" {
		steps = append(steps, nodeStep(p, f.Node))
	}
	for _, c := range p.Status.Conditions {
		detail := strings.TrimPrefix(c.Reason+": "+c.Message, ": ")
		steps = append(steps, Step{Time: c.LastTransitionTime.Time, Component: ComponentStatus, Step: fmt.Sprintf("%s=%s", c.Type, c.Status),
			Detail: strings.TrimSuffix(detail, ": "), OK: c.Status == v1.ConditionTrue})
	}
	for _, cs := range allStatuses(p) {
		steps = append(steps, containerSteps(cs)...)
	}
	for _, name := range sortedKeys(f.Logs) {
		steps = append(steps, Step{Time: f.Now, Component: ComponentRuntime, Step: "logs " + name, Detail: f.Logs[name], OK: true})
	}
	if dt := p.DeletionTimestamp; dt != nil {
		steps = append(steps, Step{Time: deleteRequested(p), Component: ComponentAPI, Step: "deletion requested",
			Detail: fmt.Sprintf("grace %ds, finalizers %v", grace(p), p.Finalizers), OK: true})
	}
	sortSteps(steps)
	return steps
}

// nodeStep describes the node a pod is bound to.
func nodeStep(p *v1.Pod, n *v1.Node) Step {
	s := Step{Component: ComponentNode, Step: "node " + p.Spec.NodeName}
	if n == nil {
		s.Detail = "node object not read or not found"
		return s
	}
	r := nodeCondition(n, v1.NodeReady)
	if r == nil {
		s.Detail = "no Ready condition yet"
		return s
	}
	s.OK = r.Status == v1.ConditionTrue
	s.Detail = fmt.Sprintf("Ready=%s since %s %s; podIP %s hostIP %s", r.Status, r.LastTransitionTime.Format(time.TimeOnly),
		strings.TrimSpace(r.Reason+" "+r.Message), p.Status.PodIP, p.Status.HostIP)
	return s
}

// containerSteps are a container's current state and its last termination.
func containerSteps(cs v1.ContainerStatus) []Step {
	var out []Step
	name := "container " + cs.Name
	if t := cs.LastTerminationState.Terminated; t != nil {
		out = append(out, Step{Time: t.FinishedAt.Time, Component: ComponentKubelet, Step: name + " exited",
			Detail: fmt.Sprintf("exit code %d reason %s %s (restarts %d)", t.ExitCode, t.Reason, t.Message, cs.RestartCount), OK: t.ExitCode == 0})
	}
	switch st := cs.State; {
	case st.Running != nil:
		out = append(out, Step{Time: st.Running.StartedAt.Time, Component: ComponentKubelet, Step: name + " running",
			Detail: fmt.Sprintf("ready=%v restarts=%d id=%s", cs.Ready, cs.RestartCount, cs.ContainerID), OK: cs.Ready})
	case st.Waiting != nil:
		out = append(out, Step{Component: ComponentKubelet, Step: name + " waiting",
			Detail: strings.TrimSuffix(st.Waiting.Reason+": "+st.Waiting.Message, ": "), OK: st.Waiting.Reason == "ContainerCreating" || st.Waiting.Reason == "PodInitializing"})
	case st.Terminated != nil:
		t := st.Terminated
		out = append(out, Step{Time: t.FinishedAt.Time, Component: ComponentKubelet, Step: name + " terminated",
			Detail: fmt.Sprintf("exit code %d reason %s %s", t.ExitCode, t.Reason, t.Message), OK: t.ExitCode == 0})
	}
	return out
}

// allStatuses are the pod's init container statuses, then its containers'.
func allStatuses(p *v1.Pod) []v1.ContainerStatus {
	return append(append([]v1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sortSteps orders steps by time; steps without a time keep their order after all timed ones.
func sortSteps(steps []Step) {
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i].Time, steps[j].Time
		if a.IsZero() || b.IsZero() {
			return !a.IsZero() && b.IsZero()
		}
		return a.Before(b)
	})
}

// grace is the pod's deletion grace period in seconds (its spec's when the deletion carries none).
func grace(p *v1.Pod) int64 {
	if p.DeletionGracePeriodSeconds != nil {
		return *p.DeletionGracePeriodSeconds
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// deleteRequested is when the deletion was asked for: the deletionTimestamp less the grace period.
func deleteRequested(p *v1.Pod) time.Time {
	return p.DeletionTimestamp.Add(-time.Duration(grace(p)) * time.Second)
}

func nodeCondition(n *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
