package kubelet

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubelet/prober/results"
)

// ProbeManager is the kubelet's probe hook, shaped like upstream's prober manager (package
// kubelet/prober implements it). A probes implementation plugs in through Config.ProbeManager.
//
//   - AddPod is called when a pod worker starts a pod; RemovePod when the pod is terminated and gone.
//   - UpdatePodStatus is called on every status generation with the pod's freshly computed status: the
//     container statuses carry the current containerIDs and states, and the manager must set each
//     container's Ready and Started fields from its results. It must not block.
//   - Results delivers changed results; the kubelet reads it until Run returns.
//
// The kubelet acts on every result it receives: any result re-syncs the pod (so readiness reaches the
// API quickly); a Liveness or Startup Failure marks that container instance (ContainerID) for a kill
// and restart (subject to the restart policy) by its pod worker, with upstream's Killing event
// "Container <name> failed <liveness|startup> probe, will be restarted" and the probe's own
// terminationGracePeriodSeconds when it sets one (else the pod's). The failure detail belongs to the
// prober's Unhealthy event; the kubelet only logs Message.
type ProbeManager interface {
	AddPod(pod *v1.Pod)
	RemovePod(pod *v1.Pod)
	UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus)
	Results() <-chan results.Update
}

// noProber is the behaviour without a probe manager, matching upstream semantics for containers whose
// probes never ran: a running container is Started unless it has a startup probe, and Ready unless it
// has a readiness probe or a startup probe (a probe that has not succeeded means not ready).
type noProber struct{}

func (noProber) AddPod(*v1.Pod)                 {}
func (noProber) RemovePod(*v1.Pod)              {}
func (noProber) Results() <-chan results.Update { return nil }
func (noProber) UpdatePodStatus(pod *v1.Pod, s *v1.PodStatus) {
	probes := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		probes[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		probes[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	set := func(list []v1.ContainerStatus) {
		for i := range list {
			cs := &list[i]
			c := probes[cs.Name]
			running := cs.State.Running != nil
			started := running && c != nil && c.StartupProbe == nil
			cs.Started = &started
			if cs.State.Terminated != nil && cs.State.Terminated.Reason == "Completed" {
				// A finished init container counts as ready; app containers that stopped do not.
				continue
			}
			cs.Ready = started && c.ReadinessProbe == nil
		}
	}
	set(s.InitContainerStatuses)
	set(s.ContainerStatuses)
}
