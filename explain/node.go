package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
)

// NodeFacts are the objects a node's explanation is computed from: the Node (required), its Lease in
// kube-node-lease (the kubelet's heartbeat; nil when absent), the pods bound to it, the node's events,
// and Now.
type NodeFacts struct {
	Node   *v1.Node
	Lease  *coordinationv1.Lease
	Pods   []v1.Pod
	Events []v1.Event
	Now    time.Time
}

// NodeTimeline returns the node's registration, heartbeat, conditions, taints, events and a count of
// its pods by phase, in time order.
func NodeTimeline(f NodeFacts) []Step {
	n := f.Node
	steps := []Step{{Time: n.CreationTimestamp.Time, Component: ComponentAPI, Step: "registered", OK: true,
		Detail: fmt.Sprintf("uid=%s resourceVersion=%s addresses=%v", n.UID, n.ResourceVersion, n.Status.Addresses)}}
	if l := f.Lease; l != nil && l.Spec.RenewTime != nil {
		steps = append(steps, Step{Time: l.Spec.RenewTime.Time, Component: ComponentKubelet, Step: "heartbeat", OK: true,
			Detail: fmt.Sprintf("lease renewed %s ago", age(f.Now, l.Spec.RenewTime.Time))})
	}
	for _, c := range n.Status.Conditions {
		ok := c.Status == v1.ConditionFalse
		if c.Type == v1.NodeReady {
			ok = c.Status == v1.ConditionTrue
		}
		steps = append(steps, Step{Time: c.LastTransitionTime.Time, Component: ComponentStatus, Step: fmt.Sprintf("%s=%s", c.Type, c.Status),
			Detail: strings.TrimSuffix(c.Reason+": "+c.Message, ": "), OK: ok})
	}
	for _, t := range n.Spec.Taints {
		steps = append(steps, Step{Component: ComponentNode, Step: "taint", Detail: t.ToString(), OK: t.Effect == v1.TaintEffectPreferNoSchedule})
	}
	for _, e := range f.Events {
		steps = append(steps, Step{Time: eventTime(&e), Component: e.Source.Component, Step: e.Reason, Detail: e.Message, OK: e.Type != v1.EventTypeWarning})
	}
	phases := map[string]int{}
	for _, p := range f.Pods {
		phases[string(p.Status.Phase)]++
	}
	var parts []string
	for ph, c := range phases {
		parts = append(parts, fmt.Sprintf("%s=%d", ph, c))
	}
	sort.Strings(parts)
	steps = append(steps, Step{Time: f.Now, Component: ComponentNode, Step: "pods", Detail: fmt.Sprintf("%d bound: %s", len(f.Pods), strings.Join(parts, " ")), OK: true})
	sortSteps(steps)
	return steps
}

// NodeVerdict: a node is stuck when not Ready, under pressure, without network, or cordoned.
func NodeVerdict(f NodeFacts) Verdict {
	n := f.Node
	if v, bad := nodeNotReady(n.Name, n, false); bad {
		if l := f.Lease; l != nil && l.Spec.RenewTime != nil {
			v.Message += fmt.Sprintf(" (last heartbeat %s ago)", age(f.Now, l.Spec.RenewTime.Time))
		}
		return v
	}
	for _, c := range n.Status.Conditions {
		if c.Type != v1.NodeReady && c.Status == v1.ConditionTrue {
			return Verdict{Stuck: true, Step: string(c.Type), Message: fmt.Sprintf("node %s %s: %s", n.Name, c.Type, c.Message),
				Fix: "free the resource the condition names (memory, disk, PIDs) or fix the node's network"}
		}
	}
	if n.Spec.Unschedulable {
		return Verdict{Stuck: true, Step: "SchedulingDisabled", Message: "node " + n.Name + " is cordoned: no new pod is scheduled to it",
			Fix: "kubectl uncordon " + n.Name}
	}
	return Verdict{Step: "Ready", Message: fmt.Sprintf("node %s Ready with %d pods", n.Name, len(f.Pods))}
}
