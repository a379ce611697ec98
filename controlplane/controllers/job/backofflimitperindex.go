package job

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Pod failure backoff of an index, as upstream's DefaultJobPodFailureBackOff and
// MaxJobPodFailureBackOff: the replacement of an index's n-th failure waits 10s·2^(n-1), at most 10
// minutes, after the failed pod finished.
const (
	indexBackoffBase = 10 * time.Second
	indexBackoffMax  = 10 * time.Minute
)

// hasBackoffLimitPerIndex reports whether job is an Indexed Job with spec.backoffLimitPerIndex set.
func hasBackoffLimitPerIndex(job *batchv1.Job) bool {
	return job.Spec.BackoffLimitPerIndex != nil && job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

// indexFailureCounts reads the pod's batch.kubernetes.io/job-index-failure-count and
// job-index-ignored-failure-count annotations: the failures of its index before it that counted
// towards backoffLimitPerIndex, and those a podFailurePolicy Ignore rule matched (absent or bad: 0).
func indexFailureCounts(p *v1.Pod) (counted, ignored int32) {
	read := func(key string) int32 {
		n, err := strconv.ParseInt(p.Annotations[key], 10, 32)
		if err != nil || n < 0 {
			return 0
		}
		return int32(n)
	}
	return read(batchv1.JobIndexFailureCountAnnotation), read(batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// failureIgnored reports whether a podFailurePolicy Ignore rule matches the failed pod p: its failure
// then counts neither towards backoffLimit nor backoffLimitPerIndex.
func failureIgnored(job *batchv1.Job, p *v1.Pod) bool {
	action, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
	return action != nil && *action == batchv1.PodFailurePolicyActionIgnore
}

// failsJob reports whether a FailJob rule of podFailurePolicy matches the failed pod p.
func failsJob(job *batchv1.Job, p *v1.Pod) bool {
	action, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
	return action != nil && *action == batchv1.PodFailurePolicyActionFailJob
}

// indexFailed reports whether the failed pod p fails its index for good (upstream's isIndexFailed): a
// FailIndex rule of podFailurePolicy matches it, or its failure counts and its index had already
// failed backoffLimitPerIndex times before it.
func indexFailed(job *batchv1.Job, p *v1.Pod) bool {
	action, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
	if action != nil {
		switch *action {
		case batchv1.PodFailurePolicyActionFailIndex:
			return true
		case batchv1.PodFailurePolicyActionIgnore:
			return false
		}
	}
	counted, _ := indexFailureCounts(p)
	return counted >= *job.Spec.BackoffLimitPerIndex
}

// lastFailedPerIndex returns, for each index below completions that is neither done, failed nor
// running, its last failed pod: the one with the most failures of the index before it (counted and
// ignored), the latest finished among equals. The replacement carries its counts on (see
// setIndexFailureCounts) and waits out its backoff (see indexBackoff); it keeps its finalizer until
// then (see delayedRelease).
func lastFailedPerIndex(job *batchv1.Job, pods []*v1.Pod, skip func(int) bool) map[int]*v1.Pod {
	out := map[int]*v1.Pod{}
	for _, p := range pods {
		ix := completionIndex(p)
		if ix < 0 || int32(ix) >= *job.Spec.Completions || skip(ix) || !podFailed(job, p) {
			continue
		}
		if last, ok := out[ix]; ok {
			lc, li := indexFailureCounts(last)
			pc, pi := indexFailureCounts(p)
			if lc+li > pc+pi || finishedTime(p).Before(finishedTime(last)) {
				continue
			}
		}
		out[ix] = p
	}
	return out
}

// setIndexFailureCounts writes the failure-count annotations of a new pod of an index whose last
// failed pod is prev (nil: none, counts 0): prev's counts, plus one counted failure, or one ignored
// failure when an Ignore rule of podFailurePolicy matched prev.
func setIndexFailureCounts(job *batchv1.Job, pod, prev *v1.Pod) {
	var counted, ignored int32
	if prev != nil {
		counted, ignored = indexFailureCounts(prev)
		if failureIgnored(job, prev) {
			ignored++
		} else {
			counted++
		}
	}
	pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(counted))
	if ignored > 0 {
		pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}

// indexBackoff returns how long after now the replacement of the index whose last failed pod is prev
// must still wait (0: none): 10s·2^(n-1), capped at 10 minutes, from prev's finish time, n being the
// index's failures so far (counted and ignored) including prev's.
func indexBackoff(now time.Time, prev *v1.Pod) time.Duration {
	if prev == nil {
		return 0
	}
	counted, ignored := indexFailureCounts(prev)
	d := indexBackoffBase
	for i := int32(1); i < counted+ignored+1 && d < indexBackoffMax; i++ {
		d *= 2
	}
	d = min(d, indexBackoffMax)
	return max(0, d-now.Sub(finishedTime(prev)))
}

// finishedTime estimates when pod p finished, as upstream's getFinishedTime: its containers' latest
// finishedAt (when all are terminated), else the last transition of Ready to False, else its deletion
// time less the grace period, else its creation time.
func finishedTime(p *v1.Pod) time.Time {
	var latest time.Time
	all := len(p.Status.ContainerStatuses) > 0
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.FinishedAt.IsZero() {
			all = false
			break
		}
		if t.FinishedAt.After(latest) {
			latest = t.FinishedAt.Time
		}
	}
	if all {
		return latest
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		grace := int64(0)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return p.CreationTimestamp.Time
}

// delayedRelease returns the UIDs of the failed pods whose counting and finalizer release wait for
// their index's replacement, as upstream's podsWithDelayedDeletionPerIndex: with backoffLimitPerIndex,
// the last failed pod (see lastFailedPerIndex) of each index that is neither done, failed (by now) nor
// running keeps its finalizer, so it cannot disappear before the replacement took its failure counts
// on. nil without backoffLimitPerIndex.
func delayedRelease(job *batchv1.Job, pods []*v1.Pod) map[types.UID]bool {
	if !hasBackoffLimitPerIndex(job) {
		return nil
	}
	finishedIx := parseIndexes(job.Status.CompletedIndexes)
	for ix := range parseIndexes(ptr.Deref(job.Status.FailedIndexes, "")) {
		finishedIx[ix] = true
	}
	active := map[int]bool{}
	for _, p := range pods {
		ix := completionIndex(p)
		switch {
		case ix < 0:
		case p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			active[ix] = true
		case hasFinalizer(p) && podFailed(job, p) && (indexFailed(job, p) || failsJob(job, p)):
			finishedIx[ix] = true // failing its index, or the Job, now: counted at once
		}
	}
	out := map[types.UID]bool{}
	for _, p := range lastFailedPerIndex(job, pods, func(ix int) bool { return finishedIx[ix] || active[ix] }) {
		if hasFinalizer(p) {
			out[p.UID] = true
		}
	}
	return out
}
