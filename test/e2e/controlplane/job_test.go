package controlplane

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestJobServedAndRunsToComplete creates an Indexed Job through the API server: the registry
// generates its selector and labels and refuses a bad maxFailedIndexes with 422; the Job
// controller and scheduler place its pods on a registered node, and as their phases are set to
// Succeeded through pods/status (no kubelet runs here; the fake agent only runs pods), the Job
// reaches Complete with every index done. A Job with backoffLimitPerIndex 0 whose index 1 fails
// fails with reason FailedIndexes and status.failedIndexes "1", its index not recreated. Discovery
// lists jobs and controllerrevisions.
func TestJobServedAndRunsToComplete(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("job-a", "4", "8Gi")

	resources, err := c.Client.Discovery().ServerResourcesForGroupVersion("batch/v1")
	must(t, err)
	names := map[string]bool{}
	for _, r := range resources.APIResources {
		names[r.Name] = true
	}
	if !names["jobs"] || !names["jobs/status"] {
		t.Fatalf("batch/v1 discovery = %v", names)
	}
	apps, err := c.Client.Discovery().ServerResourcesForGroupVersion("apps/v1")
	must(t, err)
	found := false
	for _, r := range apps.APIResources {
		found = found || r.Name == "controllerrevisions"
	}
	if !found {
		t.Fatal("apps/v1 discovery lacks controllerrevisions")
	}

	mk := func(name string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "c", Image: "demo-server", Command: []string{"true"}}}}}}}
	}
	bad := mk("refused")
	bad.Spec.BackoffLimitPerIndex, bad.Spec.MaxFailedIndexes = ptr.To[int32](1), ptr.To[int32](3)
	_, err = c.Client.BatchV1().Jobs("default").Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.maxFailedIndexes") || !strings.Contains(err.Error(), "must be less than or equal to completions") {
		t.Fatalf("maxFailedIndexes above completions: want 422 naming spec.maxFailedIndexes, got %v", err)
	}
	always := mk("always")
	always.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyAlways
	if _, err = c.Client.BatchV1().Jobs("default").Create(ctx, always, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.template.spec.restartPolicy") {
		t.Fatalf("restartPolicy Always: want 422, got %v", err)
	}

	job, err := c.Client.BatchV1().Jobs("default").Create(ctx, mk("work"), metav1.CreateOptions{})
	must(t, err)
	if job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(job.UID) ||
		job.Spec.Template.Labels[batchv1.JobNameLabel] != "work" || *job.Spec.BackoffLimit != 6 || *job.Spec.Suspend {
		t.Fatalf("created job: selector %v template labels %v backoffLimit %d", job.Spec.Selector, job.Spec.Template.Labels, *job.Spec.BackoffLimit)
	}
	// backoffLimitPerIndex 0: each index gets one pod; index 1 fails, index 0 succeeds, and the Job
	// fails with reason FailedIndexes.
	perIndex := mk("per-index")
	perIndex.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
	perIndex, err = c.Client.BatchV1().Jobs("default").Create(ctx, perIndex, metav1.CreateOptions{})
	must(t, err)
	if *perIndex.Spec.BackoffLimit != math.MaxInt32 {
		t.Fatalf("backoffLimit defaulted to %d with backoffLimitPerIndex, want MaxInt32", *perIndex.Spec.BackoffLimit)
	}
	sel := batchv1.ControllerUidLabel + "=" + string(job.UID)
	eventually(t, 30*time.Second, "both indexes running on job-a", func() error {
		pods, err := c.activePods("default", sel)
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Spec.NodeName != "job-a" || p.Status.Phase != v1.PodRunning {
				return errorf("pod %s node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		return nil
	})
	// The containers "exit 0": what a kubelet would report.
	pods, err := c.activePods("default", sel)
	must(t, err)
	c.finishPods(t, pods, func(v1.Pod) v1.PodPhase { return v1.PodSucceeded })
	c.awaitJobStatus(t, "work", func(st batchv1.JobStatus) bool {
		return jobCondition(st, batchv1.JobComplete, "") && st.Succeeded == 2 && (st.CompletedIndexes == "0,1" || st.CompletedIndexes == "0-1") && st.CompletionTime != nil
	})
	perIndexSel := batchv1.ControllerUidLabel + "=" + string(perIndex.UID)
	eventually(t, 30*time.Second, "both indexes of per-index running", func() error {
		pods, err := c.activePods("default", perIndexSel)
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		if running != 2 {
			return errorf("%d of %d pods running", running, len(pods))
		}
		return nil
	})
	pods, err = c.activePods("default", perIndexSel)
	must(t, err)
	for _, p := range pods {
		if p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "0" {
			t.Fatalf("pod %s has failure count %q, want 0", p.Name, p.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
	}
	c.finishPods(t, pods, func(p v1.Pod) v1.PodPhase {
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "1" {
			return v1.PodFailed
		}
		return v1.PodSucceeded
	})
	c.awaitJobStatus(t, "per-index", func(st batchv1.JobStatus) bool {
		return jobCondition(st, batchv1.JobFailed, batchv1.JobReasonFailedIndexes) && ptr.Deref(st.FailedIndexes, "") == "1" &&
			st.CompletedIndexes == "0" && st.Failed == 1 && st.Succeeded == 1
	})
	if pods, err = c.activePods("default", perIndexSel); err != nil || len(pods) != 2 {
		t.Fatalf("per-index has pods %d (%v), want its 2 finished ones and no replacement", len(pods), err)
	}
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	must(t, err)
	for _, p := range list.Items {
		if len(p.Finalizers) != 0 {
			t.Fatalf("pod %s keeps finalizers %v after completion", p.Name, p.Finalizers)
		}
	}
	checkJobAdoptsAndReleases(t, c, mk("adopt"))
}

// checkJobAdoptsAndReleases is upstream's "Job should adopt matching orphans and release non-matching
// pods": a running pod whose ownerReferences are cleared is adopted back (controller reference to the
// Job, job-tracking finalizer kept), and once its labels no longer match it is released (no controller
// reference, no job-tracking finalizer, so nothing blocks its deletion).
func checkJobAdoptsAndReleases(t *testing.T, c *cluster, job *batchv1.Job) {
	ctx := context.Background()
	job.Spec.CompletionMode = nil
	job, err := c.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{})
	must(t, err)
	sel := batchv1.ControllerUidLabel + "=" + string(job.UID)
	var victim v1.Pod
	eventually(t, 30*time.Second, "adopt's pods running", func() error {
		pods, err := c.activePods("default", sel)
		if err != nil {
			return err
		}
		if len(pods) != 2 || pods[0].Status.Phase != v1.PodRunning {
			return errorf("%d pods", len(pods))
		}
		victim = pods[0]
		return nil
	})
	pods := c.Client.CoreV1().Pods("default")
	update := func(change func(*v1.Pod)) {
		t.Helper()
		modify(t, func() (*v1.Pod, error) { return pods.Get(ctx, victim.Name, metav1.GetOptions{}) }, change,
			func(p *v1.Pod) error {
				_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
				return err
			})
	}
	hasTracking := func(p *v1.Pod) bool { return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) }
	update(func(p *v1.Pod) { p.OwnerReferences = nil })
	eventually(t, 20*time.Second, "orphaned pod readopted", func() error {
		p, err := pods.Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "Job" || ref.UID != job.UID || !hasTracking(p) {
			return errorf("controller %+v finalizers %v", ref, p.Finalizers)
		}
		return nil
	})
	update(func(p *v1.Pod) { p.Labels = nil })
	eventually(t, 20*time.Second, "unlabelled pod released", func() error {
		p, err := pods.Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref != nil || hasTracking(p) {
			return errorf("controller %+v finalizers %v", ref, p.Finalizers)
		}
		return nil
	})
	// The Job replaces the pod it let go.
	eventually(t, 20*time.Second, "replacement of the released pod", func() error {
		list, err := c.activePods("default", sel)
		if err != nil {
			return err
		}
		if len(list) != 2 {
			return errorf("%d pods", len(list))
		}
		return nil
	})
}

// finishPods sets each pod's phase to phase(pod) through pods/status, as a kubelet reports an exited
// container (no kubelet runs here).
func (c *cluster) finishPods(t *testing.T, pods []v1.Pod, phase func(v1.Pod) v1.PodPhase) {
	t.Helper()
	for _, p := range pods {
		p.Status.Phase = phase(p)
		p.Status.Conditions = nil
		_, err := c.Client.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{})
		must(t, err)
	}
}

// awaitJobStatus waits up to 30s until the status of Job default/name satisfies ok.
func (c *cluster) awaitJobStatus(t *testing.T, name string, ok func(batchv1.JobStatus) bool) {
	t.Helper()
	eventually(t, 30*time.Second, "status of job "+name, func() error {
		j, err := c.Client.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !ok(j.Status) {
			return errorf("status %+v", j.Status)
		}
		return nil
	})
}

// jobCondition reports whether st has condition t True, with reason (any when "").
func jobCondition(st batchv1.JobStatus, t batchv1.JobConditionType, reason string) bool {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}
