package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/kuberuntime"
)

// Container waiting reasons the kubelet shows before a container has run.
const (
	ContainerCreating = "ContainerCreating"
	PodInitializing   = "PodInitializing"
)

// Input is what Generate turns into an API pod status.
type Input struct {
	Pod *v1.Pod
	// Old is the last status the kubelet knows (written or read from the API); it keeps start time,
	// transition times, pod IPs and restart counts stable.
	Old v1.PodStatus
	// Runtime is the pod's runtime state.
	Runtime *kuberuntime.PodStatus
	// Waiting returns the reason recorded by the last failed start of the named container.
	Waiting func(container string) (kuberuntime.Waiting, bool)
	// HostIPs are the node's addresses, primary first.
	HostIPs []string
	// Terminal: the pod worker has finished the pod (it is not restarted any more whatever the
	// restartPolicy).
	Terminal bool
	// Probe sets each container's Ready and Started from probe results (ProbeManager.UpdatePodStatus).
	Probe func(*v1.PodStatus)
	Now   time.Time
}

// Generate computes the pod's API status from its runtime state: container statuses (state, last
// state, restart count, exit code and reason, Ready/Started from Probe; ephemeral containers' too), phase (upstream's getPhase
// rules), the conditions PodScheduled, PodReadyToStartContainers, Initialized, ContainersReady and Ready,
// pod and host IPs (a hostNetwork pod's IPs are the host's), start time and QoS class. A Succeeded or Failed phase is never left.
func Generate(in Input) v1.PodStatus {
	pod, old, rs := in.Pod, in.Old, in.Runtime
	now := metav1.NewTime(in.Now.Truncate(time.Second))
	s := v1.PodStatus{QOSClass: podspec.QOSClass(pod), StartTime: old.StartTime}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if len(in.HostIPs) > 0 {
		s.HostIP = in.HostIPs[0]
	}
	podIPs := rs.IPs
	if pod.Spec.HostNetwork && len(podIPs) == 0 {
		podIPs = in.HostIPs // a hostNetwork pod has the node's addresses, as upstream reports them
	}
	if len(podIPs) > 0 {
		s.PodIP = podIPs[0]
		for _, ip := range podIPs {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	} else {
		s.PodIP, s.PodIPs = old.PodIP, old.PodIPs
	}

	appStarted := false
	for _, c := range pod.Spec.Containers {
		if rs.FindContainerStatus(c.Name) != nil {
			appStarted = true
		}
	}
	oldByName := map[string]v1.ContainerStatus{}
	for _, cs := range append(append(append([]v1.ContainerStatus{}, old.InitContainerStatuses...), old.ContainerStatuses...), old.EphemeralContainerStatuses...) {
		oldByName[cs.Name] = cs
	}
	for _, c := range pod.Spec.InitContainers {
		// A pod with init containers shows its not yet created ones as PodInitializing, as upstream's
		// default waiting state.
		cs := containerStatus(&c, rs, in.Waiting, oldByName[c.Name], PodInitializing)
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 && !kuberuntime.IsRestartableInit(&c) {
			cs.Ready = true
		}
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	initialized, incomplete := isInitialized(pod, s.InitContainerStatuses, appStarted)
	for _, c := range pod.Spec.Containers {
		def := ContainerCreating
		if !initialized {
			def = PodInitializing
		}
		s.ContainerStatuses = append(s.ContainerStatuses, containerStatus(&c, rs, in.Waiting, oldByName[c.Name], def))
	}
	// Ephemeral containers: state, exit code and restart count (always 0) as any container's; they
	// count for neither readiness nor phase.
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, containerStatus(c, rs, in.Waiting, oldByName[c.Name], ContainerCreating))
	}
	if in.Probe != nil {
		in.Probe(&s)
	}

	s.Phase = phase(pod, s, initialized, in.Terminal)
	if podspec.IsTerminal(old.Phase) {
		s.Phase = old.Phase
	}

	cond := func(t v1.PodConditionType, ok bool, reason, msg string) {
		s.Conditions = append(s.Conditions, condition(old.Conditions, t, ok, reason, msg, now))
	}
	sandboxReady := rs.ReadySandbox() != nil && (len(rs.IPs) > 0 || pod.Spec.HostNetwork)
	cond(v1.PodReadyToStartContainers, sandboxReady, "", "")
	cond(v1.PodInitialized, initialized, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	s.Conditions = append(s.Conditions, readyConditions(pod, &s, old.Conditions, now)...)
	cond(v1.PodScheduled, true, "", "")
	// Conditions set by others (readiness gates, DisruptionTarget, ...) are kept as they are.
	for _, oc := range old.Conditions {
		switch oc.Type {
		case v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled:
		default:
			s.Conditions = append(s.Conditions, oc)
		}
	}
	return s
}

// condition builds a pod condition, keeping the old transition time when its status did not change.
func condition(old []v1.PodCondition, t v1.PodConditionType, ok bool, reason, msg string, now metav1.Time) v1.PodCondition {
	st := v1.ConditionFalse
	if ok {
		st, reason, msg = v1.ConditionTrue, "", ""
	}
	c := v1.PodCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now}
	for _, oc := range old {
		if oc.Type == t && oc.Status == st {
			c.LastTransitionTime = oc.LastTransitionTime
			c.LastProbeTime = oc.LastProbeTime
		}
	}
	return c
}

// readyConditions computes ContainersReady (every app and sidecar container Ready; never for a pod
// that completed) and Ready (ContainersReady and every readiness gate condition True in old).
func readyConditions(pod *v1.Pod, s *v1.PodStatus, old []v1.PodCondition, now metav1.Time) []v1.PodCondition {
	var unready []string
	for _, cs := range s.InitContainerStatuses {
		if c := findSpec(pod.Spec.InitContainers, cs.Name); c != nil && kuberuntime.IsRestartableInit(c) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	ready, reason, msg := len(unready) == 0, "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if podspec.IsTerminal(s.Phase) {
		ready, reason, msg = false, "PodCompleted", ""
	}
	podReady, podReason, podMsg := ready, reason, msg
	if ready {
		var missing []string
		for _, g := range pod.Spec.ReadinessGates {
			ok := false
			for _, oc := range old {
				if oc.Type == g.ConditionType && oc.Status == v1.ConditionTrue {
					ok = true
				}
			}
			if !ok {
				missing = append(missing, string(g.ConditionType))
			}
		}
		if len(missing) > 0 {
			podReady, podReason, podMsg = false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is false", missing)
		}
	}
	return []v1.PodCondition{
		condition(old, v1.ContainersReady, ready, reason, msg, now),
		condition(old, v1.PodReady, podReady, podReason, podMsg, now),
	}
}

func findSpec(list []v1.Container, name string) *v1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func terminated(cs *kuberuntime.ContainerStatus) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    cs.ExitCode,
		Reason:      cs.Reason,
		Message:     cs.Message,
		StartedAt:   metav1.NewTime(cs.StartedAt),
		FinishedAt:  metav1.NewTime(cs.FinishedAt),
		ContainerID: cs.ContainerID(),
	}
}

// containerStatus converts the newest runtime instance of c (and the one before it, for lastState).
// An exited container with a recorded waiting reason (e.g. CrashLoopBackOff) shows as Waiting with the
// exit as lastState, as upstream does; one never created shows Waiting with its start error or def.
func containerStatus(c *v1.Container, rs *kuberuntime.PodStatus, waiting func(string) (kuberuntime.Waiting, bool), old v1.ContainerStatus, def string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: old.RestartCount}
	w, hasWaiting := kuberuntime.Waiting{}, false
	if waiting != nil {
		w, hasWaiting = waiting(c.Name)
	}
	inst := rs.ContainerInstances(c.Name)
	if len(inst) == 0 {
		cs.LastTerminationState = old.LastTerminationState
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: def}
		}
		return cs
	}
	latest := inst[0]
	cs.ContainerID = latest.ContainerID()
	cs.ImageID = latest.ImageRef
	cs.RestartCount = int32(latest.RestartCount)
	if len(inst) > 1 && inst[1].State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.LastTerminationState.Terminated = terminated(inst[1])
	}
	switch latest.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			cs.LastTerminationState.Terminated = terminated(latest)
		} else {
			cs.State.Terminated = terminated(latest)
		}
	default:
		reason := def
		if hasWaiting {
			reason = w.Reason
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: w.Message}
	}
	return cs
}

// isInitialized: every regular init container completed (exit 0) and every restartable init container
// started, or app containers already ran. It also returns the incomplete ones, sorted.
func isInitialized(pod *v1.Pod, statuses []v1.ContainerStatus, appStarted bool) (bool, []string) {
	if appStarted {
		return true, nil
	}
	var incomplete []string
	for i, c := range pod.Spec.InitContainers {
		cs := statuses[i]
		if kuberuntime.IsRestartableInit(&c) {
			if cs.State.Running == nil {
				incomplete = append(incomplete, c.Name)
			}
			continue
		}
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			incomplete = append(incomplete, c.Name)
		}
	}
	sort.Strings(incomplete)
	return len(incomplete) == 0, incomplete
}

// phase follows upstream's getPhase: Pending while initializing or any container waits for its first
// run; Failed when a regular init container failed under restartPolicy Never; Running while any
// container runs (or all stopped and they will restart); Succeeded when all exited 0 and none restart;
// Failed when some exited non-zero and none restart.
func phase(pod *v1.Pod, s v1.PodStatus, initialized, terminal bool) v1.PodPhase {
	for i, c := range pod.Spec.InitContainers {
		if kuberuntime.IsRestartableInit(&c) {
			continue
		}
		cs := s.InitContainerStatuses[i]
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
	}
	if !initialized {
		if terminal {
			return v1.PodFailed
		}
		return v1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range s.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				stopped++
				if t.ExitCode == 0 {
					succeeded++
				}
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0 && !terminal:
		return v1.PodPending
	case running > 0 && !terminal:
		return v1.PodRunning
	case stopped > 0 || terminal:
		if !terminal && pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded && stopped == len(s.ContainerStatuses) {
			return v1.PodSucceeded
		}
		if terminal || pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}
