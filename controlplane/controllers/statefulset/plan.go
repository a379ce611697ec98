package statefulset

import (
	"regexp"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/controlplane/controllers/podutil"
)

// podName is upstream's pattern of a StatefulSet pod's name: <set>-<ordinal>.
var podName = regexp.MustCompile("^(.*)-([0-9]+)$")

// ordinalOf returns the ordinal in pod's name when the name is <set>-<ordinal> of set, else -1.
func ordinalOf(set *appsv1.StatefulSet, pod *v1.Pod) int {
	m := podName.FindStringSubmatch(pod.Name)
	if m == nil || m[1] != set.Name {
		return -1
	}
	n, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicasOf(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

func isRunningAndReady(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && podutil.IsReady(p) }

func isAvailable(p *v1.Pod, minReady time.Duration, now time.Time) bool {
	return isRunningAndReady(p) && podutil.AvailableIn(p, minReady, now) == 0
}

func isUnavailable(p *v1.Pod, minReady time.Duration, now time.Time) bool {
	return !isAvailable(p, minReady, now) || p.DeletionTimestamp != nil
}

func isTerminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded
}

func revisionOf(p *v1.Pod) string { return p.Labels[appsv1.ControllerRevisionHashLabelKey] }

// identityMatches reports whether pod carries its identity labels (upstream identityMatches; the name
// and namespace match by construction).
func identityMatches(pod *v1.Pod, ord int) bool {
	return pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name && pod.Labels[appsv1.PodIndexLabel] == strconv.Itoa(ord)
}

// revision is a ControllerRevision's name and the pod template it holds.
type revision struct {
	name     string
	template *v1.PodTemplateSpec
	revision *appsv1.ControllerRevision
}

// input is what one sync of a StatefulSet sees.
type input struct {
	set             *appsv1.StatefulSet
	current, update revision
	pods            []*v1.Pod // the pods set controls whose name is <set>-<ordinal>
	now             time.Time
}

// plan is what one sync does, in order: create, then relabel (identity labels), then delete; and the
// status to write.
type plan struct {
	create  []*v1.Pod
	relabel []*v1.Pod
	delete  []deletion
	status  appsv1.StatefulSetStatus
	// requeue is how long until a ready pod becomes available (minReadySeconds), 0 for none.
	requeue time.Duration
}

type deletion struct {
	pod    *v1.Pod
	reason string // "failed", "scale down", "update"
}

// newPod is upstream's newVersionedStatefulSetPod: the pod of ordinal ord from the current
// revision's template when the set rolls updates and ord's index is below the partition, else from
// the update revision's; named <set>-<ord>, with hostname = its name, subdomain = serviceName, the
// pod-name, pod-index and controller-revision-hash labels, under a controller ownerReference.
func newPod(in *input, ord int) *v1.Pod {
	rev := in.update
	st := in.set.Spec.UpdateStrategy
	if st.Type == appsv1.RollingUpdateStatefulSetStrategyType && st.RollingUpdate != nil && st.RollingUpdate.Partition != nil &&
		ord-startOrdinal(in.set) < int(*st.RollingUpdate.Partition) {
		rev = in.current
	}
	pod := podutil.FromTemplate(rev.template, in.set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	pod.Name = in.set.Name + "-" + strconv.Itoa(ord)
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev.name
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = in.set.Spec.ServiceName
	addClaimVolumes(in.set, pod, ord)
	return pod
}

// maxUnavailable is spec.updateStrategy.rollingUpdate.maxUnavailable scaled to replicas (rounded
// down), at least 1 (upstream getStatefulSetMaxUnavailable).
func maxUnavailable(set *appsv1.StatefulSet, replicas int) int {
	v := intstr.FromInt32(1)
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		v = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, replicas, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// decide is upstream's updateStatefulSet for one sync. Pods with ordinals in [start, start+replicas)
// are the replicas, the others are condemned. OrderedReady: replicas are created one at a time in
// ordinal order, each only once its predecessors are Running, Ready and available (minReadySeconds);
// an unhealthy replica halts all progress; condemned pods are deleted one at a time from the highest
// ordinal. Parallel: all creations and deletions at once. Failed or succeeded replicas are deleted
// (and recreated under the same name on a later sync). Then, with RollingUpdate, replicas whose index
// is >= partition and whose revision is not the update revision are deleted from the highest ordinal
// down, at most maxUnavailable unavailable at a time; OnDelete leaves them until a user deletes them.
func decide(in *input) *plan {
	set := in.set
	start, n := startOrdinal(set), replicasOf(set)
	minReady := time.Duration(set.Spec.MinReadySeconds) * time.Second
	replicas := make([]*v1.Pod, n)
	var condemned []*v1.Pod
	for _, p := range in.pods {
		ord := ordinalOf(set, p)
		switch {
		case ord < 0:
		case ord >= start && ord < start+n:
			replicas[ord-start] = p
		default:
			condemned = append(condemned, p)
		}
	}
	out := &plan{}
	out.status = status(in, minReady)
	for _, p := range in.pods {
		if isRunningAndReady(p) && p.DeletionTimestamp == nil {
			if wait := podutil.AvailableIn(p, minReady, in.now); wait > 0 && (out.requeue == 0 || wait < out.requeue) {
				out.requeue = wait
			}
		}
	}
	fresh := map[*v1.Pod]bool{}
	for i := range replicas {
		if replicas[i] == nil {
			replicas[i] = newPod(in, start+i)
			fresh[replicas[i]] = true
		}
	}
	sort.Slice(condemned, func(i, j int) bool { return ordinalOf(set, condemned[i]) > ordinalOf(set, condemned[j]) })
	var firstUnavailable *v1.Pod
	for _, p := range replicas {
		if fresh[p] || isUnavailable(p, minReady, in.now) {
			firstUnavailable = p
			break
		}
	}
	if firstUnavailable == nil {
		for i := len(condemned) - 1; i >= 0; i-- {
			if isUnavailable(condemned[i], minReady, in.now) {
				firstUnavailable = condemned[i]
				break
			}
		}
	}
	if set.DeletionTimestamp != nil {
		return out
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement

	for i, p := range replicas {
		switch {
		case fresh[p]:
			out.create = append(out.create, p)
			if monotonic {
				return out
			}
			continue
		case isTerminal(p):
			if p.DeletionTimestamp == nil {
				out.delete = append(out.delete, deletion{p, "failed"})
			}
			if monotonic {
				return out
			}
			continue
		}
		if monotonic && (p.DeletionTimestamp != nil || !isAvailable(p, minReady, in.now)) {
			return out
		}
		if !identityMatches(p, start+i) {
			out.relabel = append(out.relabel, p)
		}
	}

	for _, p := range condemned {
		if p.DeletionTimestamp != nil {
			if monotonic {
				return out
			}
			continue
		}
		if monotonic && !isAvailable(p, minReady, in.now) && p != firstUnavailable {
			return out
		}
		out.delete = append(out.delete, deletion{p, "scale down"})
		if monotonic {
			return out
		}
	}

	if set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return out
	}
	rollingUpdate(in, out, replicas, fresh, minReady, monotonic)
	return out
}

// rollingUpdate adds the deletions of upstream's updateStatefulSetAfterInvariantEstablished: among the
// replicas with index >= partition, those not at the update revision, highest ordinal first, while
// fewer than maxUnavailable replicas are unavailable (Parallel first deletes the old ones that are
// already unavailable, which cost no budget).
func rollingUpdate(in *input, out *plan, replicas []*v1.Pod, fresh map[*v1.Pod]bool, minReady time.Duration, monotonic bool) {
	set := in.set
	updateMin := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		updateMin = int(*ru.Partition)
	}
	budget := maxUnavailable(set, len(replicas))
	old := func(p *v1.Pod) bool {
		return !fresh[p] && revisionOf(p) != in.update.name && p.DeletionTimestamp == nil
	}
	unavailable, oldUnavailable := 0, 0
	for _, p := range replicas {
		if fresh[p] || isUnavailable(p, minReady, in.now) {
			unavailable++
			if !monotonic && old(p) {
				oldUnavailable++
			}
		}
	}
	if unavailable >= budget && oldUnavailable == 0 {
		return
	}
	if !monotonic {
		for i := len(replicas) - 1; i >= updateMin; i-- {
			if p := replicas[i]; old(p) && !isAvailable(p, minReady, in.now) {
				out.delete = append(out.delete, deletion{p, "update"})
				out.status.CurrentReplicas--
			}
		}
		left := budget - unavailable
		for i := len(replicas) - 1; i >= updateMin && left > 0; i-- {
			if p := replicas[i]; old(p) && !isUnavailable(p, minReady, in.now) {
				out.delete = append(out.delete, deletion{p, "update"})
				out.status.CurrentReplicas--
				left--
			}
		}
		return
	}
	left := budget - unavailable
	for i := len(replicas) - 1; i >= updateMin && left > 0; i-- {
		if p := replicas[i]; old(p) {
			out.delete = append(out.delete, deletion{p, "update"})
			out.status.CurrentReplicas--
			left--
		}
	}
}

// status counts pods as upstream computeReplicaStatus: replicas (created), readyReplicas (Running and
// Ready), availableReplicas (ready for minReadySeconds), currentReplicas and updatedReplicas (not
// terminating, at the current or update revision); then completes a finished rollout
// (currentRevision := updateRevision when every replica is updated and ready).
func status(in *input, minReady time.Duration) appsv1.StatefulSetStatus {
	set := in.set
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    in.current.name,
		UpdateRevision:     in.update.name,
		CollisionCount:     set.Status.CollisionCount,
		Conditions:         set.Status.Conditions,
	}
	if st.CollisionCount == nil {
		st.CollisionCount = new(int32)
	}
	for _, p := range in.pods {
		if ordinalOf(set, p) < 0 {
			continue
		}
		st.Replicas++
		if isRunningAndReady(p) {
			st.ReadyReplicas++
			if isAvailable(p, minReady, in.now) {
				st.AvailableReplicas++
			}
		}
		if p.DeletionTimestamp == nil {
			if revisionOf(p) == in.current.name {
				st.CurrentReplicas++
			}
			if revisionOf(p) == in.update.name {
				st.UpdatedReplicas++
			}
		}
	}
	return st
}

// completeUpdate is upstream's: when every replica is updated and ready, the update revision becomes
// the current one.
func completeUpdate(set *appsv1.StatefulSet, st *appsv1.StatefulSetStatus) {
	n := int32(replicasOf(set))
	if st.UpdatedReplicas == n && st.ReadyReplicas == n && st.Replicas == n {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
	}
}
