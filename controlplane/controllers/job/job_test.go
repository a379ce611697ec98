package job

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func testJob(name string, completions, parallelism, backoff int32, mode batchv1.CompletionMode) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
		Spec: batchv1.JobSpec{
			Completions: &completions, Parallelism: &parallelism, BackoffLimit: &backoff, CompletionMode: &mode,
			Suspend: ptr.To(false), PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: name + "-uid"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.ControllerUidLabel: name + "-uid"}},
				Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}},
		},
	}
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
}

func start(t *testing.T, jobs ...*batchv1.Job) *harness { return startClock(t, nil, jobs...) }

// startClock runs the controller on clk (nil: the real clock) for jobs.
func startClock(t *testing.T, clk clock.PassiveClock, jobs ...*batchv1.Job) *harness {
	client := fake.NewClientset()
	for _, j := range jobs {
		if _, err := client.BatchV1().Jobs("default").Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.StatusSubresource(client, "jobs", "pods")
	controllertest.GenerateNames(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, clk, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	return &harness{t: t, ctx: ctx, client: client}
}

// pods returns the job's pods that are not finished, once there are n.
func (h *harness) running(job string, n int) []v1.Pod {
	h.t.Helper()
	var out []v1.Pod
	controllertest.Eventually(h.t, fmt.Sprintf("%d running pods of %s", n, job), func() error {
		list, _ := h.client.CoreV1().Pods("default").List(h.ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + job + "-uid"})
		out = nil
		for _, p := range list.Items {
			if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
				out = append(out, p)
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d running", len(out))
		}
		return nil
	})
	return out
}

func (h *harness) finish(p v1.Pod, phase v1.PodPhase) {
	h.t.Helper()
	pods := h.client.CoreV1().Pods("default")
	controllertest.Modify(h.t, func() (*v1.Pod, error) { return pods.Get(h.ctx, p.Name, metav1.GetOptions{}) },
		func(p *v1.Pod) { p.Status.Phase = phase },
		func(p *v1.Pod) error { _, err := pods.UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); return err })
}

func (h *harness) status(job string, check func(batchv1.JobStatus) error) batchv1.JobStatus {
	h.t.Helper()
	var st batchv1.JobStatus
	controllertest.Eventually(h.t, "status of "+job, func() error {
		j, err := h.client.BatchV1().Jobs("default").Get(h.ctx, job, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st = j.Status
		if err := check(st); err != nil {
			return fmt.Errorf("%v (status %+v)", err, st)
		}
		return nil
	})
	return st
}

func hasCond(st batchv1.JobStatus, t batchv1.JobConditionType, reason string) bool {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

func TestJobRunsToCompletion(t *testing.T) {
	h := start(t, testJob("pi", 2, 1, 6, batchv1.NonIndexedCompletion))
	p := h.running("pi", 1)[0]
	if len(p.Finalizers) != 1 || p.Finalizers[0] != batchv1.JobTrackingFinalizer || !metav1.IsControlledBy(&p, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "pi-uid"}}) {
		t.Fatalf("pod finalizers %v owners %v", p.Finalizers, p.OwnerReferences)
	}
	h.finish(p, v1.PodSucceeded)
	p2 := h.running("pi", 1)[0]
	h.status("pi", func(st batchv1.JobStatus) error {
		if st.Succeeded != 1 || st.Active != 1 || st.StartTime == nil {
			return fmt.Errorf("want succeeded 1 active 1")
		}
		return nil
	})
	got, _ := h.client.CoreV1().Pods("default").Get(h.ctx, p.Name, metav1.GetOptions{})
	if len(got.Finalizers) != 0 {
		t.Fatalf("counted pod keeps finalizers %v", got.Finalizers)
	}
	// A failure within backoffLimit is replaced and counted.
	h.finish(p2, v1.PodFailed)
	p3 := h.running("pi", 1)[0]
	h.finish(p3, v1.PodSucceeded)
	st := h.status("pi", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobComplete, reasonCompletionsReached) || !hasCond(st, batchv1.JobSuccessCriteriaMet, reasonCompletionsReached) {
			return fmt.Errorf("want SuccessCriteriaMet and Complete")
		}
		return nil
	})
	if st.Succeeded != 2 || st.Failed != 1 || st.Active != 0 || st.CompletionTime == nil || len(st.UncountedTerminatedPods.Succeeded) != 0 {
		t.Fatalf("final status %+v", st)
	}
}

func TestJobBackoffLimitFails(t *testing.T) {
	h := start(t, testJob("bad", 3, 2, 1, batchv1.NonIndexedCompletion))
	pods := h.running("bad", 2)
	h.finish(pods[0], v1.PodFailed)
	h.finish(pods[1], v1.PodFailed)
	st := h.status("bad", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobFailed, reasonBackoffLimitExceeded) || !hasCond(st, batchv1.JobFailureTarget, reasonBackoffLimitExceeded) {
			return fmt.Errorf("want FailureTarget and Failed BackoffLimitExceeded")
		}
		return nil
	})
	if st.Failed != 2 || st.Active != 0 {
		t.Fatalf("status %+v", st)
	}
	h.running("bad", 0)
}

func TestIndexedJobAndSuspend(t *testing.T) {
	j := testJob("ix", 3, 3, 6, batchv1.IndexedCompletion)
	h := start(t, j)
	pods := h.running("ix", 3)
	seen := map[string]bool{}
	for _, p := range pods {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[ix] = true
		env := p.Spec.Containers[0].Env
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "ix-"+ix || len(env) != 1 ||
			env[0].Name != completionIndexEnv || env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Fatalf("pod %s: labels %v hostname %q env %+v", p.Name, p.Labels, p.Spec.Hostname, env)
		}
	}
	if !seen["0"] || !seen["1"] || !seen["2"] {
		t.Fatalf("indexes %v", seen)
	}
	for _, p := range pods {
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] != "1" {
			h.finish(p, v1.PodSucceeded)
		}
	}
	h.status("ix", func(st batchv1.JobStatus) error {
		if st.CompletedIndexes != "0,2" || st.Succeeded != 2 {
			return fmt.Errorf("want completedIndexes 0,2")
		}
		return nil
	})
	// Suspend: the running pod is deleted, Suspended is set and startTime cleared.
	cur, _ := h.client.BatchV1().Jobs("default").Get(h.ctx, "ix", metav1.GetOptions{})
	cur.Spec.Suspend = ptr.To(true)
	if _, err := h.client.BatchV1().Jobs("default").Update(h.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.running("ix", 0)
	h.status("ix", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobSuspended, reasonSuspended) || st.StartTime != nil || st.Active != 0 || st.Failed != 0 {
			return fmt.Errorf("want Suspended, no startTime, nothing failed")
		}
		return nil
	})
	// Resume: only index 1 is left to run.
	cur, _ = h.client.BatchV1().Jobs("default").Get(h.ctx, "ix", metav1.GetOptions{})
	cur.Spec.Suspend = ptr.To(false)
	if _, err := h.client.BatchV1().Jobs("default").Update(h.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.running("ix", 1)[0]
	if p.Annotations[batchv1.JobCompletionIndexAnnotation] != "1" {
		t.Fatalf("after resume ran index %s, want 1", p.Annotations[batchv1.JobCompletionIndexAnnotation])
	}
	h.finish(p, v1.PodSucceeded)
	h.status("ix", func(st batchv1.JobStatus) error {
		if !hasCond(st, batchv1.JobComplete, reasonCompletionsReached) || st.CompletedIndexes != "0-2" {
			return fmt.Errorf("want Complete with 0-2")
		}
		return nil
	})
}

func TestFinishedJobDeletedAfterTTL(t *testing.T) {
	j := testJob("ttl", 1, 1, 6, batchv1.NonIndexedCompletion)
	j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	h := start(t, j)
	h.finish(h.running("ttl", 1)[0], v1.PodSucceeded)
	controllertest.Eventually(t, "job deleted after its TTL", func() error {
		if _, err := h.client.BatchV1().Jobs("default").Get(h.ctx, "ttl", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

func TestIndexesRoundTrip(t *testing.T) {
	for _, s := range []string{"", "0", "0-2", "1,3-5,7"} {
		if got := formatIndexes(parseIndexes(s)); got != s {
			t.Errorf("formatIndexes(parseIndexes(%q)) = %q", s, got)
		}
	}
}
