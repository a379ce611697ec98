package kubelet

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Upstream's NodePorts admission rejection (pkg/kubelet/lifecycle: the predicate's name as reason,
// PredicateFailureError's text as message).
const (
	NodePortsReason  = "NodePorts"
	nodePortsMessage = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
)

// admitHostPorts is the host-port half of upstream's GeneralPredicates admission: a pod is admitted
// once, on its first sync, unless a host port it claims conflicts with one of a pod admitted before
// it that is still desired and not finished (a pod bound with spec.nodeName skips the scheduler's
// NodePorts filter, so the node is the last to check). It reports whether pod is admitted.
func (k *Kubelet) admitHostPorts(pod *v1.Pod) bool {
	want := podspec.HostPorts(pod)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.admitted[pod.UID] {
		return true
	}
	if len(want) > 0 {
		for uid := range k.admitted {
			other := k.pods[uid]
			if other == nil || podspec.IsTerminal(other.Status.Phase) {
				continue
			}
			if _, failed := k.failed[uid]; failed {
				continue
			}
			if podspec.HostPortsConflict(want, podspec.HostPorts(other)) {
				return false
			}
		}
	}
	k.admitted[pod.UID] = true
	return true
}
