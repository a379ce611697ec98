package pod

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/internal/podspec"
)

// nodeLostReason is the pod status reason the node lifecycle controller sets on pods of an unreachable node.
const nodeLostReason = "NodeLost"

// tableConvertor renders kubectl's pod table: NAME READY STATUS RESTARTS AGE, and with -o wide IP NODE
// NOMINATED NODE READINESS GATES, with the cells kubectl's own printer computes (see podRow).
var tableConvertor = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Ready", "ready containers / containers (restartable init containers included)"),
		store.Column("Status", "the pod's phase or the reason it is not running"),
		store.Column("Restarts", "container restarts, with the time since the last one"),
	},
	AfterAge: []metav1.TableColumnDefinition{
		store.Wide("IP", "the pod's primary IP (status.podIPs[0])"),
		store.Wide("Node", "the node the pod is bound to"),
		store.Wide("Nominated Node", "the node the scheduler nominated by preemption"),
		store.Wide("Readiness Gates", "true readiness gate conditions / readiness gates"),
	},
	Cells: func(o runtime.Object) []any { return podRow(o.(*corev1.Pod)) },
}

// podRow is a pod's cells after NAME: READY ("1/2"), STATUS, RESTARTS ("3", or "3 (5m ago)" when the last
// termination time is known), then IP, NODE, NOMINATED NODE, READINESS GATES ("<none>" when unset).
//
// STATUS follows kubectl: the phase or status.reason; "SchedulingGated"; while initializing
// "Init:<reason>", "Init:ExitCode:<n>", "Init:Signal:<n>" or "Init:<done>/<init containers>"; afterwards
// the last waiting or terminated reason of the app containers ("ExitCode:<n>"/"Signal:<n>" without a
// reason), "Completed" read back as Running/NotReady while a container still runs; "Unknown" for a
// deleted pod of a lost node and "Terminating" for a deleted, non-terminal pod.
func podRow(p *corev1.Pod) []any {
	restartable := map[string]bool{}
	total := len(p.Spec.Containers)
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			restartable[c.Name] = true
			total++
		}
	}
	status := string(p.Status.Phase)
	if p.Status.Reason != "" {
		status = p.Status.Reason
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			status = corev1.PodReasonSchedulingGated
		}
	}

	var all, sidecars restarts
	ready := 0
	initializing := false
	for i, cs := range p.Status.InitContainerStatuses {
		all.add(cs)
		if restartable[cs.Name] {
			sidecars.add(cs)
		}
		term := cs.State.Terminated
		switch {
		case term != nil && term.ExitCode == 0:
			continue
		case restartable[cs.Name] && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case term != nil:
			status = "Init:" + terminatedReason(term)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			status = "Init:" + cs.State.Waiting.Reason
		default:
			status = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}

	counted := all
	if !initializing || conditionTrue(p, corev1.PodInitialized) {
		counted = sidecars
		running := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := p.Status.ContainerStatuses[i]
			counted.add(cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				status = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				status = terminatedReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				running = true
				ready++
			}
		}
		if status == "Completed" && running {
			status = "NotReady"
			if conditionTrue(p, corev1.PodReady) {
				status = string(corev1.PodRunning)
			}
		}
	}

	if p.DeletionTimestamp != nil && p.Status.Reason == nodeLostReason {
		status = "Unknown"
	} else if p.DeletionTimestamp != nil && !podspec.IsTerminal(p.Status.Phase) {
		status = "Terminating"
	}

	ip := ""
	if len(p.Status.PodIPs) > 0 {
		ip = p.Status.PodIPs[0].IP
	}
	return []any{store.Ratio(ready, total), status, counted.String(), store.OrNone(ip), store.OrNone(p.Spec.NodeName),
		store.OrNone(p.Status.NominatedNodeName), readinessGates(p)}
}

// restarts sums container restart counts and keeps the latest last-termination time.
type restarts struct {
	count int
	last  metav1.Time
}

func (r *restarts) add(cs corev1.ContainerStatus) {
	r.count += int(cs.RestartCount)
	if t := cs.LastTerminationState.Terminated; t != nil && r.last.Before(&t.FinishedAt) {
		r.last = t.FinishedAt
	}
}

// String is the RESTARTS cell: "3", or "3 (5m ago)" when the last restart time is known.
func (r restarts) String() string {
	if r.count != 0 && !r.last.IsZero() {
		return fmt.Sprintf("%d (%s ago)", r.count, store.Since(r.last))
	}
	return strconv.Itoa(r.count)
}

// terminatedReason is a terminated container's reason, or "Signal:<n>" / "ExitCode:<n>" without one.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

func conditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readinessGates is "<true gates>/<gates>", or "<none>" for a pod without readiness gates.
func readinessGates(p *corev1.Pod) string {
	if len(p.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	n := 0
	for _, g := range p.Spec.ReadinessGates {
		if conditionTrue(p, g.ConditionType) {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(p.Spec.ReadinessGates))
}
