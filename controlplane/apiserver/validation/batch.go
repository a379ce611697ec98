package validation

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/cronschedule"
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
// restartPolicy of OnFailure or Never, successPolicy and podFailurePolicy (see successPolicy and
// podFailurePolicy), backoffLimitPerIndex and maxFailedIndexes (see backoffLimitPerIndex), and refuses
// the fields nodekit does not implement (scheduling, a foreign managedBy).
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
	nonNegative("backoffLimitPerIndex", s.BackoffLimitPerIndex)
	nonNegative("maxFailedIndexes", s.MaxFailedIndexes)
	nonNegative("ttlSecondsAfterFinished", s.TTLSecondsAfterFinished)
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *s.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if s.PodFailurePolicy != nil {
		errs = append(errs, podFailurePolicy(s, p)...)
	}
	errs = append(errs, backoffLimitPerIndex(s, p)...)
	if s.SuccessPolicy != nil {
		errs = append(errs, successPolicy(s, p.Child("successPolicy"))...)
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
// template, completions, completionMode, podReplacementPolicy, manualSelector, managedBy,
// successPolicy, podFailurePolicy, backoffLimitPerIndex; maxFailedIndexes may change, as upstream).
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
		{"successPolicy", j.Spec.SuccessPolicy, old.Spec.SuccessPolicy},
		{"podFailurePolicy", j.Spec.PodFailurePolicy, old.Spec.PodFailurePolicy},
		{"backoffLimitPerIndex", j.Spec.BackoffLimitPerIndex, old.Spec.BackoffLimitPerIndex},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, specPath.Child(f.name))...)
	}
	return errs
}

// maxFailedIndexesLimit is the largest spec.maxFailedIndexes, as upstream's
// maxFailedIndexesForIndexedJob.
const maxFailedIndexesLimit = 100_000

// backoffLimitPerIndex validates spec.backoffLimitPerIndex and spec.maxFailedIndexes of the Job spec
// at p with upstream's messages: both only in Indexed completion mode, maxFailedIndexes only with
// backoffLimitPerIndex, at most completions and at most 100000 (completions are at most 100000 in
// Indexed mode here, so upstream's rules for more completions never apply).
func backoffLimitPerIndex(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MaxFailedIndexes != nil && s.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(p.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		if s.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(p.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if s.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(p.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "requires indexed completion mode"))
		}
		return errs
	}
	if m := s.MaxFailedIndexes; m != nil {
		if s.Completions != nil && *m > *s.Completions {
			errs = append(errs, field.Invalid(p.Child("maxFailedIndexes"), *m, "must be less than or equal to completions"))
		}
		if *m > maxFailedIndexesLimit {
			errs = append(errs, field.Invalid(p.Child("maxFailedIndexes"), *m, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesLimit)))
		}
	}
	return errs
}

// cronJobNameMax is the longest CronJob name: its Jobs are named <cronjob>-<minutes since the epoch>,
// 11 more characters, within a 63-character label.
const cronJobNameMax = validation.DNS1035LabelMaxLength - 11

// CronJob validates a batch/v1 CronJob on create: a name of at most 52 characters (its Jobs add an
// 11-character suffix), and the spec (see cronJobSpec).
func CronJob(cj *batchv1.CronJob) field.ErrorList {
	errs := Subdomain(&cj.ObjectMeta)
	if len(cj.Name) > cronJobNameMax {
		errs = append(errs, field.Invalid(metaPath.Child("name"), cj.Name, fmt.Sprintf("must be no more than %d characters", cronJobNameMax)))
	}
	return append(errs, cronJobSpec(&cj.Spec, nil)...)
}

// CronJobUpdate validates an update of a CronJob: the spec rules of CronJob (a TZ in the schedule
// stays allowed only if the stored schedule had one, and timeZone is checked when it changes); the
// name length is not checked again, as upstream.
func CronJobUpdate(cj, old *batchv1.CronJob) field.ErrorList {
	return append(Subdomain(&cj.ObjectMeta), cronJobSpec(&cj.Spec, &old.Spec)...)
}

// cronJobSpec validates spec.schedule (required; parsed by cronschedule; no TZ= or CRON_TZ= in it on
// create, use spec.timeZone), spec.timeZone (an IANA name time.LoadLocation knows, not "Local"),
// spec.startingDeadlineSeconds and the history limits (>= 0), spec.concurrencyPolicy (Allow, Forbid
// or Replace) and spec.jobTemplate (a Job spec by JobSpec's rules, with no selector and no
// manualSelector: the Job's selector is generated). old is nil on create.
func cronJobSpec(s, old *batchv1.CronJobSpec) field.ErrorList {
	var errs field.ErrorList
	sp := specPath.Child("schedule")
	if s.Schedule == "" {
		errs = append(errs, field.Required(sp, ""))
	} else {
		if _, err := cronschedule.Parse(s.Schedule); err != nil {
			errs = append(errs, field.Invalid(sp, s.Schedule, err.Error()))
		}
		allowTZ := old != nil && cronschedule.HasTZ(old.Schedule)
		switch {
		case allowTZ && cronschedule.HasTZ(s.Schedule) && s.TimeZone != nil:
			errs = append(errs, field.Invalid(sp, s.Schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
		case !allowTZ && cronschedule.HasTZ(s.Schedule):
			errs = append(errs, field.Invalid(sp, s.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		}
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{
		{"startingDeadlineSeconds", s.StartingDeadlineSeconds},
		{"successfulJobsHistoryLimit", int64Ptr(s.SuccessfulJobsHistoryLimit)},
		{"failedJobsHistoryLimit", int64Ptr(s.FailedJobsHistoryLimit)},
	} {
		if f.v != nil && *f.v < 0 {
			errs = append(errs, field.Invalid(specPath.Child(f.name), *f.v, "must be greater than or equal to 0"))
		}
	}
	if old == nil || !ptr.Equal(old.TimeZone, s.TimeZone) {
		errs = append(errs, timeZone(s.TimeZone, specPath.Child("timeZone"))...)
	}
	cp := specPath.Child("concurrencyPolicy")
	switch s.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(cp, ""))
	default:
		errs = append(errs, field.NotSupported(cp, s.ConcurrencyPolicy, []string{string(batchv1.AllowConcurrent),
			string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	jt := specPath.Child("jobTemplate")
	errs = append(errs, metav1validation.ValidateLabels(s.JobTemplate.Labels, jt.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(s.JobTemplate.Annotations, jt.Child("metadata", "annotations"))...)
	errs = append(errs, JobSpec(&s.JobTemplate.Spec, jt.Child("spec"))...)
	if s.JobTemplate.Spec.Selector != nil {
		errs = append(errs, field.Invalid(jt.Child("spec", "selector"), s.JobTemplate.Spec.Selector, "`selector` will be auto-generated"))
	}
	if m := s.JobTemplate.Spec.ManualSelector; m != nil && *m {
		errs = append(errs, field.NotSupported(jt.Child("spec", "manualSelector"), *m, []string{"nil", "false"}))
	}
	return errs
}

// validTimeZonePart is one component of an IANA zone name (upstream's validTimeZoneCharacters).
var validTimeZonePart = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// timeZone checks a CronJob's spec.timeZone: nil, or an IANA name (components of letters, digits,
// '.', '-', '_', '+', none "." or ".." or starting with '-'), not "Local", that time.LoadLocation
// loads from the zone database.
func timeZone(tz *string, p *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(p, *tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZonePart.MatchString(part) {
			return field.ErrorList{field.Invalid(p, *tz, "unknown time zone "+*tz)}
		}
	}
	if strings.EqualFold(*tz, "Local") {
		return field.ErrorList{field.Invalid(p, *tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return field.ErrorList{field.Invalid(p, *tz, err.Error())}
	}
	return nil
}

func int64Ptr(v *int32) *int64 {
	if v == nil {
		return nil
	}
	return ptr.To(int64(*v))
}
