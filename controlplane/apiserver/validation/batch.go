package validation

import (
	"fmt"
	"maps"

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
