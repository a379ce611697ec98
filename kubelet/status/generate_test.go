package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubelet/kuberuntime"
)

func rt(states ...*kuberuntime.ContainerStatus) *kuberuntime.PodStatus {
	return &kuberuntime.PodStatus{IPs: []string{"10.0.0.5"},
		SandboxStatuses:   []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		ContainerStatuses: states}
}

func cs(name string, state runtimeapi.ContainerState, exit int32, reason string, restarts int, age time.Duration) *kuberuntime.ContainerStatus {
	t := time.Unix(2000, 0).Add(-age)
	return &kuberuntime.ContainerStatus{ID: name + age.String(), Runtime: "containerd", Name: name, State: state, ExitCode: exit,
		Reason: reason, RestartCount: restarts, CreatedAt: t, StartedAt: t, FinishedAt: t.Add(time.Second)}
}

func gen(pod *v1.Pod, r *kuberuntime.PodStatus, waiting map[string]kuberuntime.Waiting) v1.PodStatus {
	return Generate(Input{Pod: pod, Runtime: r, HostIPs: []string{"192.0.2.1"}, Now: time.Unix(3000, 0),
		Waiting: func(n string) (kuberuntime.Waiting, bool) { w, ok := waiting[n]; return w, ok },
		Probe: func(s *v1.PodStatus) {
			for i := range s.ContainerStatuses {
				s.ContainerStatuses[i].Ready = s.ContainerStatuses[i].State.Running != nil
			}
		}})
}

func cond(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func pod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

var (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func TestGeneratePhasesAndStates(t *testing.T) {
	// Never created yet: Pending, ContainerCreating.
	s := gen(pod(v1.RestartPolicyAlways, "a"), rt(), nil)
	if s.Phase != v1.PodPending || s.ContainerStatuses[0].State.Waiting.Reason != ContainerCreating {
		t.Errorf("new pod: %s %+v", s.Phase, s.ContainerStatuses[0].State)
	}
	if cond(s, v1.PodReadyToStartContainers) != v1.ConditionTrue || s.PodIP != "10.0.0.5" || s.HostIP != "192.0.2.1" || s.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("new pod status %+v", s)
	}
	// Running: Ready.
	s = gen(pod(v1.RestartPolicyAlways, "a"), rt(cs("a", running, 0, "", 0, 0)), nil)
	if s.Phase != v1.PodRunning || cond(s, v1.PodReady) != v1.ConditionTrue || cond(s, v1.ContainersReady) != v1.ConditionTrue {
		t.Errorf("running pod: %s %+v", s.Phase, s.Conditions)
	}
	// Crash loop: waiting CrashLoopBackOff, lastState = the exit, restartCount kept, phase Running.
	s = gen(pod(v1.RestartPolicyAlways, "a"), rt(cs("a", exited, 3, "Error", 2, 0), cs("a", exited, 3, "Error", 1, time.Minute)),
		map[string]kuberuntime.Waiting{"a": {Reason: kuberuntime.CrashLoopBackOff}})
	c := s.ContainerStatuses[0]
	if s.Phase != v1.PodRunning || c.State.Waiting == nil || c.State.Waiting.Reason != kuberuntime.CrashLoopBackOff ||
		c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.ExitCode != 3 || c.RestartCount != 2 {
		t.Errorf("crash loop: %s %+v", s.Phase, c)
	}
	if cond(s, v1.PodReady) != v1.ConditionFalse {
		t.Errorf("crash-looping pod is Ready")
	}
	// Never: a failure is Failed; OnFailure with all successes is Succeeded.
	s = gen(pod(v1.RestartPolicyNever, "a", "b"), rt(cs("a", exited, 0, "Completed", 0, 0), cs("b", exited, 137, "OOMKilled", 0, 0)), nil)
	if s.Phase != v1.PodFailed || s.ContainerStatuses[1].State.Terminated.Reason != "OOMKilled" {
		t.Errorf("Never with a failure: %s %+v", s.Phase, s.ContainerStatuses)
	}
	s = gen(pod(v1.RestartPolicyOnFailure, "a"), rt(cs("a", exited, 0, "Completed", 0, 0)), nil)
	if s.Phase != v1.PodSucceeded || cond(s, v1.PodReady) != v1.ConditionFalse {
		t.Errorf("OnFailure success: %s", s.Phase)
	}
	// Always with exited containers while being terminated: terminal, Failed (non-zero).
	s = Generate(Input{Pod: pod(v1.RestartPolicyAlways, "a"), Runtime: rt(cs("a", exited, 143, "Error", 0, 0)), Terminal: true, Now: time.Unix(3000, 0)})
	if s.Phase != v1.PodFailed {
		t.Errorf("terminated Always pod with exit 143: %s", s.Phase)
	}
	// A terminal phase is never left.
	s = Generate(Input{Pod: pod(v1.RestartPolicyAlways, "a"), Old: v1.PodStatus{Phase: v1.PodSucceeded}, Runtime: rt(cs("a", running, 0, "", 0, 0)), Now: time.Unix(3000, 0)})
	if s.Phase != v1.PodSucceeded {
		t.Errorf("phase left Succeeded: %s", s.Phase)
	}
}

func TestGenerateInitAndTransitionTimes(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, "app")
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "img"}, {Name: "init2", Image: "img"}}
	s := gen(p, rt(cs("init", running, 0, "", 0, 0)), nil)
	if s.Phase != v1.PodPending || cond(s, v1.PodInitialized) != v1.ConditionFalse || s.ContainerStatuses[0].State.Waiting.Reason != PodInitializing {
		t.Errorf("initializing: %s %+v %+v", s.Phase, s.Conditions, s.ContainerStatuses)
	}
	// A later init container not created yet waits as PodInitializing, as upstream.
	if w := s.InitContainerStatuses[1].State.Waiting; w == nil || w.Reason != PodInitializing {
		t.Errorf("second init container: %+v, want waiting PodInitializing", s.InitContainerStatuses[1].State)
	}
	p.Spec.InitContainers = p.Spec.InitContainers[:1]
	s = gen(p, rt(cs("init", running, 0, "", 0, 0)), nil)
	s2 := Generate(Input{Pod: p, Old: s, Runtime: rt(cs("init", exited, 0, "Completed", 0, time.Second), cs("app", running, 0, "", 0, 0)),
		Now: time.Unix(4000, 0), Probe: func(st *v1.PodStatus) { st.ContainerStatuses[0].Ready = true }})
	if cond(s2, v1.PodInitialized) != v1.ConditionTrue || !s2.InitContainerStatuses[0].Ready || s2.Phase != v1.PodRunning {
		t.Errorf("initialized: %+v", s2)
	}
	for _, c := range s2.Conditions {
		if c.Type == v1.PodScheduled && !c.LastTransitionTime.Equal(&metav1.Time{Time: time.Unix(3000, 0)}) {
			t.Errorf("unchanged condition got a new transition time %v", c.LastTransitionTime)
		}
		if c.Type == v1.PodInitialized && !c.LastTransitionTime.Equal(&metav1.Time{Time: time.Unix(4000, 0)}) {
			t.Errorf("changed condition kept its old transition time %v", c.LastTransitionTime)
		}
	}
	if !s2.StartTime.Equal(s.StartTime) {
		t.Errorf("startTime changed")
	}
}

func TestGenerateEphemeralContainers(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, "app")
	for _, n := range []string{"done", "waiting", "pulling"} {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "dbg"}})
	}
	s := gen(p, rt(cs("app", running, 0, "", 0, 0), cs("done", exited, 3, "Error", 0, 0)), map[string]kuberuntime.Waiting{"pulling": {Reason: "ErrImagePull", Message: "no"}})
	if len(s.EphemeralContainerStatuses) != 3 {
		t.Fatalf("ephemeralContainerStatuses: %+v", s.EphemeralContainerStatuses)
	}
	done, waiting, pulling := s.EphemeralContainerStatuses[0], s.EphemeralContainerStatuses[1], s.EphemeralContainerStatuses[2]
	if done.Name != "done" || done.State.Terminated == nil || done.State.Terminated.ExitCode != 3 || done.ContainerID != "containerd://done0s" || done.Image != "dbg" {
		t.Errorf("exited ephemeral container: %+v", done)
	}
	if waiting.State.Waiting == nil || waiting.State.Waiting.Reason != ContainerCreating {
		t.Errorf("ephemeral container not created yet: %+v", waiting.State)
	}
	if pulling.State.Waiting == nil || pulling.State.Waiting.Reason != "ErrImagePull" {
		t.Errorf("ephemeral container whose pull failed: %+v", pulling.State)
	}
	// They count for neither phase nor readiness.
	if s.Phase != v1.PodRunning || cond(s, v1.PodReady) != v1.ConditionTrue || len(s.ContainerStatuses) != 1 {
		t.Errorf("phase %s, Ready %s, containerStatuses %d; want Running, True, 1", s.Phase, cond(s, v1.PodReady), len(s.ContainerStatuses))
	}
}
