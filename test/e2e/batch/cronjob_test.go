// Package batch_test runs CronJobs end to end: the real bundled API server (embedded etcd), the
// scheduler and the Job, CronJob and garbage-collector controllers under the controller manager's own
// identity (so the bootstrap RBAC policy's roles are what they run with), and a node agent on a private
// real containerd that runs the Jobs' pods. The schedule logic's timing (missed start times, deadlines,
// Forbid/Replace, history) is covered with a fake clock in controlplane/controllers/cronjob; here a
// CronJob runs at a real minute boundary.
package batch_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers"
	"github.com/nodekit/nodekit/controlplane/scheduler"
	"github.com/nodekit/nodekit/images/bundled"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

const ns = "default"

type cluster struct {
	api    *apiserver.Server
	client kubernetes.Interface
	node   string
}

func logger() *slog.Logger {
	if os.Getenv("NODEKIT_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startCluster starts the API server, containerd, a node agent, the scheduler and the Job, CronJob and
// garbage-collector controllers; all stop and are removed at cleanup.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &cluster{node: "batch-" + hex.EncodeToString(b[:])}
	cgroupRoot := fwagent.CgroupRoot(t, c.node)
	rt := containerd.Start(t, containerd.Options{})
	c.api = apiserver.Start(t, apiserver.Options{})
	c.client = c.api.Client
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() {
		errs <- scheduler.Run(ctx, c.api.SchedulerClient(t), scheduler.Options{Logger: logger(), RetryInterval: 5 * time.Second})
	}()
	go func() {
		errs <- controllers.Run(ctx, c.api.ControllerManagerClient(t), controllers.Options{Logger: logger(),
			Controllers: []string{controllers.Job, controllers.CronJob, controllers.GarbageCollector}})
	}()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("control loop: %v", err)
			}
		}
	})
	cfg := fwagent.Config(t, c.node, rt, c.api)
	cfg.Kubelet.CgroupRoot, cfg.Logger = cgroupRoot, logger()
	fwagent.Start(t, cfg)
	waitFor(t, 60*time.Second, "node "+c.node+" Ready", func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", n.Status.Conditions)
	})
	return c
}

// waitFor polls cond every 200 ms until it returns nil, failing with its last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cronJob runs the demo server for half a second (exit 0) every minute.
func cronJob(name string) *batchv1.CronJob {
	grace := int64(1)
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cronjob": name}},
			Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
				TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{Name: "run", Image: bundled.DemoServerV1, ImagePullPolicy: v1.PullIfNotPresent,
					Args: []string{"--exit-after=500ms", "--exit-code=0"}}}}}}}}}
}

// kubectlPath is kubectl 1.37 when the conformance cache has built it, else the kubectl on PATH.
func kubectlPath() string {
	const cached = "/var/cache/nodekit/conformance/v1.37.2/bin/kubectl"
	if _, err := exec.LookPath(cached); err == nil {
		return cached
	}
	p, _ := exec.LookPath("kubectl")
	return p
}

func (c *cluster) kubectl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"--kubeconfig", c.api.KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// completeOnNode waits until Job name is Complete with its pod Succeeded on the node, and returns it.
func (c *cluster) completeOnNode(t *testing.T, name string, timeout time.Duration) *batchv1.Job {
	t.Helper()
	ctx := context.Background()
	var job *batchv1.Job
	waitFor(t, timeout, "job "+name+" Complete with its pod Succeeded on "+c.node, func() error {
		var err error
		if job, err = c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if done, _ := finished(job); done != batchv1.JobComplete || job.Status.Succeeded != 1 || job.Status.CompletionTime == nil {
			return fmt.Errorf("status %+v", job.Status)
		}
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == c.node && p.Status.Phase == v1.PodSucceeded {
				return nil
			}
		}
		return fmt.Errorf("%d pods, none Succeeded on %s", len(pods.Items), c.node)
	})
	return job
}

func finished(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == v1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

// TestCronJob: bad CronJobs are refused with 422 naming the field; a CronJob run by hand through
// `kubectl create job --from=cronjob/…` and at its first minute boundary has both Jobs run to
// completion on the real node; lastScheduleTime and lastSuccessfulTime follow; with
// successfulJobsHistoryLimit 1 the older Job is deleted; a suspended CronJob created before the same
// boundary made no Job; kubectl prints the CronJob columns.
func TestCronJob(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cj := c.client.BatchV1().CronJobs(ns)

	for _, tc := range []struct {
		name, field, detail string
		mutate              func(*batchv1.CronJob)
	}{
		{"bad-schedule", "spec.schedule", "expected exactly 5 fields", func(j *batchv1.CronJob) { j.Spec.Schedule = "every minute" }},
		{"tz-prefix", "spec.schedule", "use timeZone field instead", func(j *batchv1.CronJob) { j.Spec.Schedule = "TZ=UTC * * * * *" }},
		{"bad-zone", "spec.timeZone", "unknown time zone", func(j *batchv1.CronJob) { j.Spec.TimeZone = ptr.To("Nowhere/Special") }},
		{"bad-policy", "spec.concurrencyPolicy", "Unsupported value", func(j *batchv1.CronJob) { j.Spec.ConcurrencyPolicy = "Sometimes" }},
		{"bad-limit", "spec.successfulJobsHistoryLimit", "greater than or equal to 0", func(j *batchv1.CronJob) {
			j.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](-1)
		}},
		{"bad-restart", "spec.jobTemplate.spec.template.spec.restartPolicy", "Unsupported value", func(j *batchv1.CronJob) {
			j.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyAlways
		}},
	} {
		bad := cronJob(tc.name)
		tc.mutate(bad)
		_, err := cj.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%s: want 422 naming %s (%q), got %v", tc.name, tc.field, tc.detail, err)
		}
	}

	every := cronJob("every")
	every.Spec.TimeZone = ptr.To("Etc/UTC")
	every.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	created, err := cj.Create(ctx, every, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || !ptr.Equal(created.Spec.FailedJobsHistoryLimit, ptr.To[int32](1)) ||
		!ptr.Equal(created.Spec.Suspend, ptr.To(false)) {
		t.Fatalf("defaults: %+v", created.Spec)
	}
	paused := cronJob("paused")
	paused.Spec.Suspend = ptr.To(true)
	if _, err := cj.Create(ctx, paused, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first start time the controller may run: the next minute boundary after creation.
	boundary := created.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)

	// A run by hand while the schedule has not fired yet.
	kubectl := kubectlPath()
	var manual *batchv1.Job
	if kubectl == "" {
		t.Log("kubectl not installed: the run by hand and the table columns are not tried")
	} else {
		if out := c.kubectl(t, kubectl, "-n", ns, "create", "job", "manual", "--from=cronjob/every"); !strings.Contains(out, "job.batch/manual created") {
			t.Fatalf("kubectl create job --from:\n%s", out)
		}
		manual = c.completeOnNode(t, "manual", 60*time.Second)
		if manual.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" || !metav1.IsControlledBy(manual, created) ||
			manual.Labels["cronjob"] != "every" {
			t.Fatalf("manual job: annotations %v owners %v labels %v", manual.Annotations, manual.OwnerReferences, manual.Labels)
		}
	}

	name := fmt.Sprintf("every-%d", boundary.Unix()/60)
	waitUntil := time.Until(boundary) + 30*time.Second
	t.Logf("waiting up to %v for job %s (start time %s)", waitUntil.Round(time.Second), name, boundary.UTC().Format(time.RFC3339))
	job := c.completeOnNode(t, name, waitUntil)
	if got := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != boundary.UTC().Format(time.RFC3339) {
		t.Errorf("scheduled timestamp %q, want %s", got, boundary.UTC().Format(time.RFC3339))
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != created.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("job owners %+v", job.OwnerReferences)
	}
	if job.Labels["cronjob"] != "every" {
		t.Errorf("job labels %v lack the job template's", job.Labels)
	}
	t.Logf("job %s created %v after its start time, complete %v after it", name,
		job.CreationTimestamp.Sub(boundary).Round(time.Millisecond), job.Status.CompletionTime.Sub(boundary).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "cronjob status after the run", func() error {
		got, err := cj.Get(ctx, "every", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := got.Status
		if len(st.Active) != 0 || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(boundary) ||
			st.LastSuccessfulTime == nil || !st.LastSuccessfulTime.Equal(job.Status.CompletionTime) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if manual != nil {
		waitFor(t, 30*time.Second, "the older job deleted (successfulJobsHistoryLimit 1)", func() error {
			if _, err := c.client.BatchV1().Jobs(ns).Get(ctx, "manual", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("job manual: %v", err)
			}
			return nil
		})
		if _, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("newest job %s: %v", name, err)
		}
	}
	jobs, err := c.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if strings.HasPrefix(j.Name, "paused-") {
			t.Errorf("suspended cronjob made job %s", j.Name)
		}
	}
	if kubectl != "" {
		out := c.kubectl(t, kubectl, "-n", ns, "get", "cronjobs")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE" ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "every * * * * * Etc/UTC False 0 ") ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "paused * * * * * <none> True 0 <none> ") {
			t.Errorf("kubectl get cronjobs:\n%s", out)
		}
	}
}
