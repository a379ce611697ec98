package job

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// indexed returns the running pod of index ix among pods (the test fails when there is none).
func indexed(t *testing.T, pods []v1.Pod, ix int) v1.Pod {
	t.Helper()
	for _, p := range pods {
		if completionIndex(&p) == ix {
			return p
		}
	}
	t.Fatalf("no running pod of index %d", ix)
	return v1.Pod{}
}

func perIndexJob(name string, completions, limit int32, maxFailed *int32) *batchv1.Job {
	j := testJob(name, completions, completions, 6, batchv1.IndexedCompletion)
	j.Spec.BackoffLimit = ptr.To[int32](1 << 30) // the default with backoffLimitPerIndex: never reached
	j.Spec.BackoffLimitPerIndex = &limit
	j.Spec.MaxFailedIndexes = maxFailed
	return j
}

// TestJobBackoffLimitPerIndex: with backoffLimitPerIndex 1 every index is retried once; the odd ones
// failing twice are failed indexes (not recreated), the even ones still run to success, and the Job
// then fails with reason FailedIndexes, as the conformance spec "execute all indexes despite some
// failing" asserts. Replacements carry upstream's failure-count annotation.
func TestJobBackoffLimitPerIndex(t *testing.T) {
	h := start(t, perIndexJob("bpi", 4, 1, nil))
	pods := h.running("bpi", 4)
	for _, p := range pods {
		if p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "0" {
			t.Fatalf("first pod %s failure count %q, want 0", p.Name, p.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
	}
	h.exit(indexed(t, pods, 1), 1)
	h.exit(indexed(t, pods, 3), 1)
	h.finish(indexed(t, pods, 0), v1.PodSucceeded)
	pods = h.running("bpi", 3)
	for _, ix := range []int{1, 3} {
		if p := indexed(t, pods, ix); p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "1" {
			t.Fatalf("replacement of index %d failure count %q, want 1", ix, p.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
	}
	h.exit(indexed(t, pods, 1), 1)
	h.exit(indexed(t, pods, 3), 1)
	h.status("bpi", func(st batchv1.JobStatus) error {
		if ptr.Deref(st.FailedIndexes, "") != "1,3" || hasCond(st, batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes) {
			return fmt.Errorf("want failedIndexes 1,3 and the Job still running index 2")
		}
		return nil
	})
	pods = h.running("bpi", 1)
	h.finish(indexed(t, pods, 2), v1.PodSucceeded)
	st := h.status("bpi", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, batchv1.JobReasonFailedIndexes) {
			return fmt.Errorf("want Failed with reason FailedIndexes")
		}
		return nil
	})
	if st.CompletedIndexes != "0,2" || ptr.Deref(st.FailedIndexes, "") != "1,3" || st.Failed != 4 || st.Succeeded != 2 || st.Active != 0 {
		t.Fatalf("final status %+v", st)
	}
}

// TestJobMaxFailedIndexes: past maxFailedIndexes the Job fails at once with reason
// MaxFailedIndexesExceeded and its running pods are deleted, as the conformance spec "terminate job
// execution when the number of failed indexes exceeds maxFailedIndexes" asserts.
func TestJobMaxFailedIndexes(t *testing.T) {
	h := start(t, perIndexJob("mfi", 3, 0, ptr.To[int32](0)))
	pods := h.running("mfi", 3)
	h.exit(indexed(t, pods, 0), 1)
	st := h.status("mfi", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, batchv1.JobReasonMaxFailedIndexesExceeded) {
			return fmt.Errorf("want Failed with reason MaxFailedIndexesExceeded")
		}
		return nil
	})
	if ptr.Deref(st.FailedIndexes, "") != "0" || st.Failed != 1 || st.Active != 0 {
		t.Fatalf("final status %+v", st)
	}
	list, err := h.client.CoreV1().Pods("default").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d pods left, want only the failed one (the running ones deleted)", len(list.Items))
	}
}

// TestJobFailIndex: a FailIndex rule of podFailurePolicy fails the index on its first failure despite
// backoffLimitPerIndex 5, an Ignore rule's failure is replaced with the ignored count, as the
// conformance spec "mark indexes as failed when the FailIndex action is matched" asserts.
func TestJobFailIndex(t *testing.T) {
	j := perIndexJob("fix", 2, 5, nil)
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		exitRule(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, 42),
		exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 7)}}
	h := start(t, j)
	pods := h.running("fix", 2)
	h.exit(indexed(t, pods, 1), 7)
	pods = h.running("fix", 2)
	if p := indexed(t, pods, 1); p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] != "1" || p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "0" {
		t.Fatalf("replacement after an ignored failure has annotations %v", p.Annotations)
	}
	h.exit(indexed(t, pods, 1), 42)
	h.finish(indexed(t, pods, 0), v1.PodSucceeded)
	st := h.status("fix", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, batchv1.JobReasonFailedIndexes) {
			return fmt.Errorf("want Failed with reason FailedIndexes")
		}
		return nil
	})
	if ptr.Deref(st.FailedIndexes, "") != "1" || st.CompletedIndexes != "0" || st.Failed != 1 {
		t.Fatalf("final status %+v", st)
	}
}

// TestIndexBackoff: 10s·2^(n-1) after the last failure, capped at 10 minutes, less the time elapsed.
func TestIndexBackoff(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := func(counted, ignored string, ago time.Duration) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{batchv1.JobIndexFailureCountAnnotation: counted,
			batchv1.JobIndexIgnoredFailureCountAnnotation: ignored}},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				FinishedAt: metav1.NewTime(now.Add(-ago))}}}}}}
	}
	for _, tc := range []struct {
		name string
		prev *v1.Pod
		want time.Duration
	}{
		{"no failure", nil, 0},
		{"first failure", failed("0", "", 0), 10 * time.Second},
		{"first failure, 4s ago", failed("0", "", 4*time.Second), 6 * time.Second},
		{"third failure, ignored ones too", failed("1", "1", 0), 40 * time.Second},
		{"capped", failed("20", "", time.Minute), 9 * time.Minute},
		{"over", failed("0", "", time.Hour), 0},
	} {
		if got := indexBackoff(now, tc.prev); got != tc.want {
			t.Errorf("%s: backoff %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJobIndexBackoffDelaysReplacement: an index's replacement waits out its backoff (10s after the
// failure); until then the failed pod keeps its finalizer and is not counted, so it cannot vanish
// before the replacement takes its failure count on, as upstream's delayed finalizer removal.
func TestJobIndexBackoffDelaysReplacement(t *testing.T) {
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	h := startClock(t, clk, perIndexJob("bo", 1, 1, nil))
	first := h.running("bo", 1)[0]
	pods := h.client.CoreV1().Pods("default")
	h.exitAt(first, 1, now)
	h.status("bo", func(st batchv1.JobStatus) error {
		if st.Active != 0 || st.Failed != 0 {
			return fmt.Errorf("want active 0 and the failure not counted yet")
		}
		return nil
	})
	h.running("bo", 0)
	if p, err := pods.Get(h.ctx, first.Name, metav1.GetOptions{}); err != nil || !hasFinalizer(p) {
		t.Fatalf("failed pod in backoff: finalizers released (%v)", err)
	}
	clk.SetTime(now.Add(11 * time.Second))
	jobs := h.client.BatchV1().Jobs("default")
	controllertest.Modify(t, func() (*batchv1.Job, error) { return jobs.Get(h.ctx, "bo", metav1.GetOptions{}) },
		func(j *batchv1.Job) { j.Annotations = map[string]string{"touch": "1"} }, // an event: the Job is synced again
		func(j *batchv1.Job) error { _, err := jobs.Update(h.ctx, j, metav1.UpdateOptions{}); return err })
	if p := h.running("bo", 1)[0]; p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "1" {
		t.Fatalf("replacement failure count %q, want 1", p.Annotations[batchv1.JobIndexFailureCountAnnotation])
	}
	h.status("bo", func(st batchv1.JobStatus) error {
		if st.Failed != 1 {
			return fmt.Errorf("want the failure counted once replaced")
		}
		return nil
	})
	controllertest.Eventually(t, "failed pod released", func() error {
		p, err := pods.Get(h.ctx, first.Name, metav1.GetOptions{})
		if err != nil || hasFinalizer(p) {
			return fmt.Errorf("finalizers %v (%v)", p.Finalizers, err)
		}
		return nil
	})
}

// TestJobMaxFailedIndexesCountsDelayedFailures: when the Job fails while a failure waits in its
// index's backoff, that failure is counted before the Job is Failed.
func TestJobMaxFailedIndexesCountsDelayedFailures(t *testing.T) {
	now := time.Now()
	j := perIndexJob("dl", 2, 1, ptr.To[int32](0))
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		exitRule(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, 42)}}
	h := startClock(t, clocktesting.NewFakeClock(now), j)
	pods := h.running("dl", 2)
	h.exitAt(indexed(t, pods, 0), 1, now)
	h.running("dl", 1)
	h.exitAt(indexed(t, pods, 1), 42, now)
	st := h.status("dl", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, batchv1.JobReasonMaxFailedIndexesExceeded) {
			return fmt.Errorf("want Failed with reason MaxFailedIndexesExceeded")
		}
		return nil
	})
	if st.Failed != 2 || ptr.Deref(st.FailedIndexes, "") != "1" {
		t.Fatalf("final status %+v, want both failures counted and failedIndexes 1", st)
	}
}

// TestJobBackoffLimitPerIndexFailJob: a FailJob rule still fails the Job at once with
// backoffLimitPerIndex, its failure not held back for a replacement.
func TestJobBackoffLimitPerIndexFailJob(t *testing.T) {
	now := time.Now()
	j := perIndexJob("fj", 2, 3, nil)
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 3)}}
	h := startClock(t, clocktesting.NewFakeClock(now), j)
	h.exitAt(indexed(t, h.running("fj", 2), 0), 3, now)
	st := h.status("fj", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, reasonPodFailurePolicy) {
			return fmt.Errorf("want Failed with reason PodFailurePolicy")
		}
		return nil
	})
	if st.Failed != 1 || ptr.Deref(st.FailedIndexes, "") != "" {
		t.Fatalf("final status %+v", st)
	}
}
