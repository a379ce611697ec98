package cronjob

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func testCronJob(schedule, created string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: "default", UID: "backup-uid", CreationTimestamp: metav1.NewTime(at(created))},
		Spec: batchv1.CronJobSpec{Schedule: schedule, ConcurrencyPolicy: batchv1.AllowConcurrent, Suspend: ptr.To(false),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](1),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "backup"}, Annotations: map[string]string{"note": "kept"}},
				Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}}}}}}},
	}
}

// childJob is a Job of cj for start time t, running or (cond non-empty) finished at done.
func childJob(cj *batchv1.CronJob, t string, cond batchv1.JobConditionType, done string) *batchv1.Job {
	start := metav1.NewTime(at(t))
	j, _ := newJob(cj, at(t))
	j.UID = types.UID(j.Name + "-uid")
	j.Status.StartTime = &start
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: v1.ConditionTrue}}
		if cond == batchv1.JobComplete {
			j.Status.CompletionTime = ptr.To(metav1.NewTime(at(done)))
		}
	}
	return j
}

func activeRef(j *batchv1.Job) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

type harness struct {
	t      *testing.T
	c      *Controller
	client *fake.Clientset
	events *record.FakeRecorder
}

// newHarness is a controller on a fake clientset holding cj and jobs, with the clock at now and
// events kept in memory. Its informers are not started: tests call sync and cleanupFinished directly.
func newHarness(t *testing.T, now string, cj *batchv1.CronJob, jobs ...*batchv1.Job) *harness {
	client := fake.NewClientset(cj)
	for _, j := range jobs {
		if _, err := client.BatchV1().Jobs(j.Namespace).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(client, informers.NewSharedInformerFactory(client, 0), testingclock.NewFakeClock(at(now)), controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	c.recorder.EventRecorder = rec
	return &harness{t: t, c: c, client: client, events: rec}
}

func (h *harness) sync(cj *batchv1.CronJob, jobs ...*batchv1.Job) *time.Duration {
	h.t.Helper()
	d, err := h.c.sync(context.Background(), cj, jobs)
	if err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	return d
}

func (h *harness) jobNames() []string {
	h.t.Helper()
	list, err := h.client.BatchV1().Jobs("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// reasons drains the recorded events and returns their reasons in order.
func (h *harness) reasons() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

func nameAt(t string) string { return "backup-" + fmt.Sprint(at(t).Unix()/60) }

// TestSyncCreatesTheDueJob: at 10:05:10 the 10:05 Job is created from the template (labels,
// annotations, spec, the scheduled-timestamp annotation, a controller ownerReference), recorded in
// status.active and lastScheduleTime, and the CronJob requeued for 10:10; a second pass creates
// nothing more.
func TestSyncCreatesTheDueJob(t *testing.T) {
	cj := testCronJob("*/5 * * * *", "2026-12-01T10:00:30Z")
	h := newHarness(t, "2026-12-01T10:05:10Z", cj)
	d := h.sync(cj)
	if d == nil || *d != 4*time.Minute+50*time.Second+nextScheduleDelta {
		t.Fatalf("requeue after %v", d)
	}
	name := nameAt("2026-12-01T10:05:00Z")
	job, err := h.client.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.UID != cj.UID || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Fatalf("owner %+v", job.OwnerReferences)
	}
	if job.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != "2026-12-01T10:05:00Z" || job.Annotations["note"] != "kept" ||
		job.Labels["app"] != "backup" || job.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("job meta %v %v spec %+v", job.Labels, job.Annotations, job.Spec)
	}
	if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != name || cj.Status.Active[0].Kind != "Job" ||
		!cj.Status.LastScheduleTime.Time.Equal(at("2026-12-01T10:05:00Z")) {
		t.Fatalf("status %+v", cj.Status)
	}
	if got := h.reasons(); len(got) != 1 || got[0] != "SuccessfulCreate" {
		t.Fatalf("events %v", got)
	}
	h.sync(cj, job)
	if got := h.jobNames(); len(got) != 1 {
		t.Fatalf("jobs after the second pass: %v", got)
	}
}

// TestSyncTimeZone: "0 9 * * *" in Asia/Tokyo runs at 00:00 UTC; the annotation is in that zone.
func TestSyncTimeZone(t *testing.T) {
	cj := testCronJob("0 9 * * *", "2026-11-30T12:00:00Z")
	cj.Spec.TimeZone = ptr.To("Asia/Tokyo")
	h := newHarness(t, "2026-11-30T23:59:00Z", cj)
	if d := h.sync(cj); *d != time.Minute+nextScheduleDelta || len(h.jobNames()) != 0 {
		t.Fatalf("before 09:00 JST: requeue %v, jobs %v", *d, h.jobNames())
	}
	h.c.clock.(*testingclock.FakeClock).SetTime(at("2026-12-01T00:00:01Z"))
	h.sync(cj)
	job, err := h.client.BatchV1().Jobs("default").Get(context.Background(), nameAt("2026-12-01T00:00:00Z"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("jobs %v: %v", h.jobNames(), err)
	}
	if got := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-12-01T09:00:00+09:00" {
		t.Fatalf("scheduled timestamp %s", got)
	}
}

// TestConcurrencyPolicies: with a Job still running at the next start time, Allow adds a second,
// Forbid skips the start (JobAlreadyActive) and Replace deletes the running one first.
func TestConcurrencyPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy     batchv1.ConcurrencyPolicy
		wantJobs   []string
		wantActive []string
		wantEvents []string
	}{
		{batchv1.AllowConcurrent, []string{nameAt("2026-12-01T10:05:00Z"), nameAt("2026-12-01T10:10:00Z")},
			[]string{nameAt("2026-12-01T10:05:00Z"), nameAt("2026-12-01T10:10:00Z")}, []string{"SuccessfulCreate"}},
		{batchv1.ForbidConcurrent, []string{nameAt("2026-12-01T10:05:00Z")}, []string{nameAt("2026-12-01T10:05:00Z")}, []string{"JobAlreadyActive"}},
		{batchv1.ReplaceConcurrent, []string{nameAt("2026-12-01T10:10:00Z")}, []string{nameAt("2026-12-01T10:10:00Z")},
			[]string{"SuccessfulDelete", "SuccessfulCreate"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			cj := testCronJob("*/5 * * * *", "2026-12-01T10:00:30Z")
			cj.Spec.ConcurrencyPolicy = tc.policy
			running := childJob(cj, "2026-12-01T10:05:00Z", "", "")
			cj.Status.Active = []v1.ObjectReference{activeRef(running)}
			cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(at("2026-12-01T10:05:00Z")))
			h := newHarness(t, "2026-12-01T10:10:02Z", cj, running)
			if d := h.sync(cj, running); *d != 5*time.Minute-2*time.Second+nextScheduleDelta {
				t.Errorf("requeue after %v", *d)
			}
			if got := h.jobNames(); fmt.Sprint(got) != fmt.Sprint(tc.wantJobs) {
				t.Errorf("jobs %v, want %v", got, tc.wantJobs)
			}
			var active []string
			for _, r := range cj.Status.Active {
				active = append(active, r.Name)
			}
			sort.Strings(active)
			if fmt.Sprint(active) != fmt.Sprint(tc.wantActive) {
				t.Errorf("active %v, want %v", active, tc.wantActive)
			}
			if got := h.reasons(); fmt.Sprint(got) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events %v, want %v", got, tc.wantEvents)
			}
		})
	}
}

// TestSuspendedCreatesNothing: a suspended CronJob past its start time makes no Job and is not
// requeued (resuming it is an update, which queues it).
func TestSuspendedCreatesNothing(t *testing.T) {
	cj := testCronJob("* * * * *", "2026-12-01T10:00:30Z")
	cj.Spec.Suspend = ptr.To(true)
	h := newHarness(t, "2026-12-01T10:03:00Z", cj)
	if d := h.sync(cj); d != nil || len(h.jobNames()) != 0 || cj.Status.LastScheduleTime != nil {
		t.Fatalf("suspended: requeue %v, jobs %v, status %+v", d, h.jobNames(), cj.Status)
	}
	cj.Spec.Suspend = ptr.To(false)
	h.sync(cj)
	if got := h.jobNames(); len(got) != 1 || got[0] != nameAt("2026-12-01T10:03:00Z") {
		t.Fatalf("resumed: jobs %v", got)
	}
}

// TestStartingDeadline: a start time older than startingDeadlineSeconds is not run; within it, it is.
func TestStartingDeadline(t *testing.T) {
	cj := testCronJob("*/5 * * * *", "2026-12-01T10:00:30Z")
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
	h := newHarness(t, "2026-12-01T10:07:00Z", cj)
	if d := h.sync(cj); *d != 3*time.Minute+nextScheduleDelta || len(h.jobNames()) != 0 {
		t.Fatalf("10:05 missed by 2m with a 60s deadline: requeue %v jobs %v", *d, h.jobNames())
	}
	h.c.clock.(*testingclock.FakeClock).SetTime(at("2026-12-01T10:10:59Z"))
	h.sync(cj)
	if got := h.jobNames(); len(got) != 1 || got[0] != nameAt("2026-12-01T10:10:00Z") {
		t.Fatalf("10:10 within the deadline: jobs %v", got)
	}
}

// TestTooManyMissed: more than 100 missed start times give the TooManyMissedTimes warning; the
// latest start time still runs.
func TestTooManyMissed(t *testing.T) {
	cj := testCronJob("* * * * *", "2026-12-01T07:00:00Z")
	h := newHarness(t, "2026-12-01T10:00:30Z", cj)
	h.sync(cj)
	if got := h.reasons(); fmt.Sprint(got) != "[TooManyMissedTimes SuccessfulCreate]" {
		t.Fatalf("events %v", got)
	}
	if got := h.jobNames(); len(got) != 1 || got[0] != nameAt("2026-12-01T10:00:00Z") {
		t.Fatalf("jobs %v", got)
	}
}

// TestFinishedJobsAndHistory: a finished active Job leaves status.active (SawCompletedJob) and sets
// lastSuccessfulTime to the latest completion; finished Jobs beyond the history limits are deleted
// oldest first; an active Job that is gone is dropped (MissingJob).
func TestFinishedJobsAndHistory(t *testing.T) {
	cj := testCronJob("*/5 * * * *", "2026-12-01T09:00:30Z")
	cj.Spec.SuccessfulJobsHistoryLimit, cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1), ptr.To[int32](1)
	s1 := childJob(cj, "2026-12-01T09:05:00Z", batchv1.JobComplete, "2026-12-01T09:06:00Z")
	s2 := childJob(cj, "2026-12-01T09:10:00Z", batchv1.JobComplete, "2026-12-01T09:11:00Z")
	s3 := childJob(cj, "2026-12-01T09:15:00Z", batchv1.JobComplete, "2026-12-01T09:16:00Z")
	f1 := childJob(cj, "2026-12-01T09:20:00Z", batchv1.JobFailed, "")
	f2 := childJob(cj, "2026-12-01T09:25:00Z", batchv1.JobFailed, "")
	gone := childJob(cj, "2026-12-01T09:30:00Z", "", "")
	cj.Status.Active = []v1.ObjectReference{activeRef(s3), activeRef(gone)}
	cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(at("2026-12-01T09:30:00Z")))
	jobs := []*batchv1.Job{s2, f2, s1, s3, f1}
	h := newHarness(t, "2026-12-01T09:32:00Z", cj, jobs...)
	h.c.cleanupFinished(context.Background(), cj, jobs)
	if got, want := h.jobNames(), []string{s3.Name, f2.Name}; fmt.Sprint(got) != fmt.Sprint(sorted(want)) {
		t.Fatalf("jobs after cleanup %v, want %v", got, sorted(want))
	}
	h.sync(cj, s3, f2)
	if len(cj.Status.Active) != 0 || !cj.Status.LastSuccessfulTime.Time.Equal(at("2026-12-01T09:16:00Z")) {
		t.Fatalf("status %+v", cj.Status)
	}
	if got := h.reasons(); fmt.Sprint(got) != "[SuccessfulDelete SuccessfulDelete SuccessfulDelete SawCompletedJob MissingJob]" {
		t.Fatalf("events %v", got)
	}
}

func sorted(s []string) []string { sort.Strings(s); return s }

// TestUnusableSchedules: a schedule that never fires gives InvalidSchedule, an unknown zone
// UnknownTimeZone; neither creates a Job or requeues.
func TestUnusableSchedules(t *testing.T) {
	cj := testCronJob("59 23 31 2 *", "2026-12-01T10:00:00Z")
	h := newHarness(t, "2026-12-01T10:10:00Z", cj)
	if d := h.sync(cj); d != nil || fmt.Sprint(h.reasons()) != "[InvalidSchedule]" {
		t.Fatalf("Feb 31: requeue %v", d)
	}
	cj = testCronJob("* * * * *", "2026-12-01T10:00:00Z")
	cj.Spec.TimeZone = ptr.To("Mars/Olympus")
	if d := h.sync(cj); d != nil || fmt.Sprint(h.reasons()) != "[UnknownTimeZone]" || len(h.jobNames()) != 0 {
		t.Fatalf("unknown zone: requeue %v", d)
	}
}

// TestControllerRunsCronJob drives the informer-fed controller: a CronJob whose start time is due
// gets its Job and status written through the API; when the Job completes, the CronJob's status
// drops it from active and records lastSuccessfulTime.
func TestControllerRunsCronJob(t *testing.T) {
	now := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	cj := testCronJob("* * * * *", now.Add(-90*time.Second).UTC().Format(time.RFC3339))
	client := fake.NewClientset(cj)
	controllertest.StatusSubresource(client, "cronjobs")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, testingclock.NewFakeClock(now), controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	want := "backup-" + fmt.Sprint(now.Truncate(time.Minute).Unix()/60)
	var job *batchv1.Job
	controllertest.Eventually(t, "job "+want+" and active status", func() error {
		if job, err = client.BatchV1().Jobs("default").Get(ctx, want, metav1.GetOptions{}); err != nil {
			return err
		}
		got, err := client.BatchV1().CronJobs("default").Get(ctx, "backup", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Active) != 1 || got.Status.Active[0].Name != want || got.Status.LastScheduleTime == nil {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	done := metav1.NewTime(now.Add(5 * time.Second).Truncate(time.Second))
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	job.Status.CompletionTime, job.Status.StartTime = &done, &done
	job.ResourceVersion = "2" // the fake tracker keeps none; the controller skips updates that keep it
	if _, err := client.BatchV1().Jobs("default").Update(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "completed job seen", func() error {
		got, err := client.BatchV1().CronJobs("default").Get(ctx, "backup", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Active) != 0 || got.Status.LastSuccessfulTime == nil || !got.Status.LastSuccessfulTime.Equal(&done) {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
}
