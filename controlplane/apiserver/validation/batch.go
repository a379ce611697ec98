package validation

import (
	"fmt"
	"maps"
	"time"
	_ "time/tzdata" // CronJob time zones must resolve without the host's zoneinfo

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// JobControllerName is the only spec.managedBy value nodekit accepts: the built-in Job controller.
const JobControllerName = "kubernetes.io/job-controller"

// notSupported is the error for a field the API defines and nodekit's controllers do not act on: it is
// refused rather than stored and ignored.
func notSupported(p *field.Path, value any) *field.Error {
	return field.Invalid(p, value, "not supported by nodekit")
}

// Job validates a batch/v1 Job on create: the counts the controller honours (parallelism, completions,
// backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished), completionMode (Indexed needs
// completions, at most 100000), podReplacementPolicy, the selector/template match, a template
// restartPolicy of OnFailure or Never, and refuses the fields nodekit does not implement
// (podFailurePolicy, backoffLimitPerIndex, maxFailedIndexes, successPolicy, scheduling, a foreign
// managedBy).
func Job(j *batchv1.Job) field.ErrorList {
	errs := Subdomain(&j.ObjectMeta)
	errs = append(errs, JobSpec(&j.Spec, specPath)...)
	if j.Spec.Selector == nil {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	}
	if j.Spec.ManualSelector == nil || !*j.Spec.ManualSelector {
		want := map[string]string{batchv1.ControllerUidLabel: string(j.UID)}
		if j.Spec.Selector != nil && (len(j.Spec.Selector.MatchExpressions) > 0 || !maps.Equal(j.Spec.Selector.MatchLabels, want)) {
			errs = append(errs, field.Invalid(specPath.Child("selector"), j.Spec.Selector, "`selector` not auto-generated"))
		}
	}
	return errs
}

// JobSpec validates a Job spec (of a Job or of a CronJob's jobTemplate) at path p.
func JobSpec(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(name string, v *int32) {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	nonNegative("parallelism", s.Parallelism)
	nonNegative("completions", s.Completions)
	nonNegative("backoffLimit", s.BackoffLimit)
	nonNegative("ttlSecondsAfterFinished", s.TTLSecondsAfterFinished)
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *s.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if s.PodFailurePolicy != nil {
		errs = append(errs, notSupported(p.Child("podFailurePolicy"), "podFailurePolicy"))
	}
	if s.BackoffLimitPerIndex != nil {
		errs = append(errs, notSupported(p.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex))
	}
	if s.MaxFailedIndexes != nil {
		errs = append(errs, notSupported(p.Child("maxFailedIndexes"), *s.MaxFailedIndexes))
	}
	if s.SuccessPolicy != nil {
		errs = append(errs, notSupported(p.Child("successPolicy"), "successPolicy"))
	}
	if s.Scheduling != nil {
		errs = append(errs, notSupported(p.Child("scheduling"), "scheduling"))
	}
	if s.ManagedBy != nil && *s.ManagedBy != JobControllerName {
		errs = append(errs, notSupported(p.Child("managedBy"), *s.ManagedBy))
	}
	if s.CompletionMode != nil {
		switch *s.CompletionMode {
		case batchv1.NonIndexedCompletion:
		case batchv1.IndexedCompletion:
			if s.Completions == nil {
				errs = append(errs, field.Required(p.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			} else if *s.Completions > 100000 {
				errs = append(errs, field.Invalid(p.Child("completions"), *s.Completions, "must be less than or equal to 100000 when completion mode is Indexed"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("completionMode"), *s.CompletionMode, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
		}
	}
	if s.PodReplacementPolicy != nil && *s.PodReplacementPolicy != batchv1.TerminatingOrFailed && *s.PodReplacementPolicy != batchv1.Failed {
		errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *s.PodReplacementPolicy, []string{string(batchv1.TerminatingOrFailed), string(batchv1.Failed)}))
	}
	tp := p.Child("template")
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labelsSet(s.Template.Labels)) {
			errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Template.Labels, tp.Child("metadata", "labels"))...)
	if rp := s.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(tp.Child("spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	errs = append(errs, PodSpec(&s.Template.Spec, tp.Child("spec"))...)
	return errs
}

// JobUpdate validates an update of a Job: the spec rules of Job, and the immutable fields (selector,
// template, completions, completionMode, podReplacementPolicy, manualSelector, managedBy).
func JobUpdate(j, old *batchv1.Job) field.ErrorList {
	errs := Job(j)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"selector", j.Spec.Selector, old.Spec.Selector},
		{"template", j.Spec.Template, old.Spec.Template},
		{"completions", j.Spec.Completions, old.Spec.Completions},
		{"completionMode", j.Spec.CompletionMode, old.Spec.CompletionMode},
		{"podReplacementPolicy", j.Spec.PodReplacementPolicy, old.Spec.PodReplacementPolicy},
		{"manualSelector", j.Spec.ManualSelector, old.Spec.ManualSelector},
		{"managedBy", j.Spec.ManagedBy, old.Spec.ManagedBy},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, specPath.Child(f.name))...)
	}
	return errs
}

// CronJob validates a batch/v1 CronJob: the name (at most 52 characters, so the Jobs it names with a
// timestamp suffix stay within 63), a schedule the standard cron parser accepts (with the @every/@daily
// descriptors; no TZ= or CRON_TZ= prefix, timeZone is the field for that), a timeZone the tz database
// knows, concurrencyPolicy, startingDeadlineSeconds and the history limits non-negative, and the job
// template's spec.
func CronJob(cj *batchv1.CronJob) field.ErrorList {
	errs := Subdomain(&cj.ObjectMeta)
	if len(cj.Name) > 52 {
		errs = append(errs, field.Invalid(metaPath.Child("name"), cj.Name, "must be no more than 52 characters"))
	}
	errs = append(errs, cronSchedule(cj.Spec.Schedule, specPath.Child("schedule"))...)
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil || *tz == "" || *tz == "Local" {
			errs = append(errs, field.Invalid(specPath.Child("timeZone"), *tz, "unknown time zone"))
		}
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("concurrencyPolicy"), cj.Spec.ConcurrencyPolicy,
			[]string{string(batchv1.AllowConcurrent), string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	for _, v := range []struct {
		name string
		val  *int32
	}{{"successfulJobsHistoryLimit", cj.Spec.SuccessfulJobsHistoryLimit}, {"failedJobsHistoryLimit", cj.Spec.FailedJobsHistoryLimit}} {
		if v.val != nil && *v.val < 0 {
			errs = append(errs, field.Invalid(specPath.Child(v.name), *v.val, "must be greater than or equal to 0"))
		}
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(specPath.Child("startingDeadlineSeconds"), *d, "must be greater than or equal to 0"))
	}
	jt := specPath.Child("jobTemplate")
	errs = append(errs, metav1validation.ValidateLabels(cj.Spec.JobTemplate.Labels, jt.Child("metadata", "labels"))...)
	if cj.Spec.JobTemplate.Spec.ManualSelector == nil || !*cj.Spec.JobTemplate.Spec.ManualSelector {
		if cj.Spec.JobTemplate.Spec.Selector != nil {
			errs = append(errs, field.Invalid(jt.Child("spec", "selector"), cj.Spec.JobTemplate.Spec.Selector, "`selector` will be auto-generated"))
		}
	}
	errs = append(errs, JobSpec(&cj.Spec.JobTemplate.Spec, jt.Child("spec"))...)
	return errs
}

// CronParser parses a CronJob schedule as the CronJob controller does: five fields (minute, hour,
// day of month, month, day of week) or a descriptor such as @hourly or @every 5m.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func cronSchedule(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(s) >= 3 && (s[:3] == "TZ=" || (len(s) >= 8 && s[:8] == "CRON_TZ=")) {
		return field.ErrorList{field.Invalid(p, s, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")}
	}
	if _, err := CronParser.Parse(s); err != nil {
		return field.ErrorList{field.Invalid(p, s, err.Error())}
	}
	return nil
}
