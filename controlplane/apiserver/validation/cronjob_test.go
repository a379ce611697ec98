package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/podspec"
)

func validCronJob() *batchv1.CronJob {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}}}
	podspec.Default(&cj.Spec.JobTemplate.Spec.Template.Spec)
	return cj
}

// TestCronJobValidation: each bad field is one 422 cause naming it; a good CronJob (with a time zone,
// descriptors, zero history limits) passes.
func TestCronJobValidation(t *testing.T) {
	for _, sched := range []string{"*/5 * * * *", "@hourly", "@every 90s", "0 9 * * 1-5", "30 6-16/4 * * MON-FRI"} {
		cj := validCronJob()
		cj.Spec.Schedule = sched
		cj.Spec.TimeZone = ptr.To("Europe/Berlin")
		cj.Spec.SuccessfulJobsHistoryLimit, cj.Spec.FailedJobsHistoryLimit, cj.Spec.StartingDeadlineSeconds = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int64](0)
		if errs := CronJob(cj); len(errs) != 0 {
			t.Errorf("schedule %q: unexpected errors %v", sched, errs)
		}
	}
	cases := []struct {
		name   string
		mutate func(*batchv1.CronJob)
		path   string
		typ    field.ErrorType
		detail string
	}{
		{"no schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "" }, "spec.schedule", field.ErrorTypeRequired, ""},
		{"bad schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "61 * * * *" }, "spec.schedule", field.ErrorTypeInvalid, "end of range (61) above maximum (59)"},
		{"six fields", func(c *batchv1.CronJob) { c.Spec.Schedule = "0 * * * * *" }, "spec.schedule", field.ErrorTypeInvalid, "expected exactly 5 fields"},
		{"TZ in schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *" }, "spec.schedule", field.ErrorTypeInvalid, "use timeZone field instead"},
		{"CRON_TZ in schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "CRON_TZ=UTC 0 * * * *" }, "spec.schedule", field.ErrorTypeInvalid, "use timeZone field instead"},
		{"unknown zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus") }, "spec.timeZone", field.ErrorTypeInvalid, "unknown time zone"},
		{"bad zone characters", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("../etc/passwd") }, "spec.timeZone", field.ErrorTypeInvalid, "unknown time zone"},
		{"Local zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Local") }, "spec.timeZone", field.ErrorTypeInvalid, "explicit time zone"},
		{"empty zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("") }, "spec.timeZone", field.ErrorTypeInvalid, "non-empty"},
		{"negative deadline", func(c *batchv1.CronJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) }, "spec.startingDeadlineSeconds", field.ErrorTypeInvalid, ""},
		{"negative successful limit", func(c *batchv1.CronJob) { c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](-1) }, "spec.successfulJobsHistoryLimit", field.ErrorTypeInvalid, ""},
		{"negative failed limit", func(c *batchv1.CronJob) { c.Spec.FailedJobsHistoryLimit = ptr.To[int32](-2) }, "spec.failedJobsHistoryLimit", field.ErrorTypeInvalid, ""},
		{"no concurrency policy", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "" }, "spec.concurrencyPolicy", field.ErrorTypeRequired, ""},
		{"bad concurrency policy", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" }, "spec.concurrencyPolicy", field.ErrorTypeNotSupported, ""},
		{"restartPolicy Always", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		},
			"spec.jobTemplate.spec.template.spec.restartPolicy", field.ErrorTypeNotSupported, ""},
		{"no containers", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers = nil },
			"spec.jobTemplate.spec.template.spec.containers", field.ErrorTypeRequired, ""},
		{"selector", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, "spec.jobTemplate.spec.selector", field.ErrorTypeInvalid, "will be auto-generated"},
		{"manualSelector", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.ManualSelector = ptr.To(true) },
			"spec.jobTemplate.spec.manualSelector", field.ErrorTypeNotSupported, ""},
		{"backoffLimitPerIndex not Indexed", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.BackoffLimitPerIndex = ptr.To[int32](1) },
			"spec.jobTemplate.spec.backoffLimitPerIndex", field.ErrorTypeInvalid, "requires indexed completion mode"},
		{"negative backoffLimit", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.BackoffLimit = ptr.To[int32](-1) },
			"spec.jobTemplate.spec.backoffLimit", field.ErrorTypeInvalid, ""},
		{"bad template label", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Labels = map[string]string{"a b": "c"} },
			"spec.jobTemplate.metadata.labels", field.ErrorTypeInvalid, ""},
		{"name too long", func(c *batchv1.CronJob) { c.Name = strings.Repeat("a", 53) }, "metadata.name", field.ErrorTypeInvalid, "no more than 52 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cj := validCronJob()
			tc.mutate(cj)
			errs := CronJob(cj)
			if !hasCause(errs, tc.path, tc.typ) {
				t.Fatalf("want %s on %s, got %v", tc.typ, tc.path, errs)
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.detail) {
				t.Fatalf("errors %v lack %q", errs, tc.detail)
			}
		})
	}
}

// TestCronJobUpdateValidation: a TZ kept in a stored schedule may stay (not together with timeZone),
// a new one may not; the 52-character name rule applies on create only.
func TestCronJobUpdateValidation(t *testing.T) {
	old := validCronJob()
	old.Spec.Schedule = "TZ=UTC 0 * * * *"
	cj := old.DeepCopy()
	cj.Spec.Schedule = "TZ=UTC 5 * * * *"
	if errs := CronJobUpdate(cj, old); len(errs) != 0 {
		t.Fatalf("kept TZ: %v", errs)
	}
	cj.Spec.TimeZone = ptr.To("UTC")
	if errs := CronJobUpdate(cj, old); !hasCause(errs, "spec.schedule", field.ErrorTypeInvalid) {
		t.Fatalf("TZ and timeZone: %v", errs)
	}
	plain := validCronJob()
	cj = plain.DeepCopy()
	cj.Spec.Schedule = "TZ=UTC 0 * * * *"
	if errs := CronJobUpdate(cj, plain); !hasCause(errs, "spec.schedule", field.ErrorTypeInvalid) {
		t.Fatalf("new TZ on update: %v", errs)
	}
	long := validCronJob()
	long.Name = strings.Repeat("a", 60)
	if errs := CronJobUpdate(long, long.DeepCopy()); len(errs) != 0 {
		t.Fatalf("long name on update: %v", errs)
	}
}
