package controlplane

import (
	"context"
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
// generates its selector and labels and refuses fields nodekit does not implement with 422; the Job
// controller and scheduler place its pods on a registered node, and as their phases are set to
// Succeeded through pods/status (no kubelet runs here; the fake agent only runs pods), the Job
// reaches Complete with every index done. Discovery lists jobs and controllerrevisions.
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
	bad.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}}}}
	_, err = c.Client.BatchV1().Jobs("default").Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.podFailurePolicy") || !strings.Contains(err.Error(), "not supported by nodekit") {
		t.Fatalf("podFailurePolicy: want 422 naming spec.podFailurePolicy, got %v", err)
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
	for _, p := range pods {
		p.Status.Phase = v1.PodSucceeded
		p.Status.Conditions = nil
		_, err := c.Client.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
		must(t, err)
	}
	eventually(t, 30*time.Second, "job Complete", func() error {
		j, err := c.Client.BatchV1().Jobs("default").Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return err
		}
		complete := false
		for _, cond := range j.Status.Conditions {
			complete = complete || (cond.Type == batchv1.JobComplete && cond.Status == v1.ConditionTrue)
		}
		if !complete || j.Status.Succeeded != 2 || j.Status.CompletedIndexes != "0,1" && j.Status.CompletedIndexes != "0-1" || j.Status.CompletionTime == nil {
			return errorf("status %+v", j.Status)
		}
		return nil
	})
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	must(t, err)
	for _, p := range list.Items {
		if len(p.Finalizers) != 0 {
			t.Fatalf("pod %s keeps finalizers %v after completion", p.Name, p.Finalizers)
		}
	}
}
