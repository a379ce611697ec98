package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodLogOptions validates the parameters of a pods/log request as kube-apiserver does
// (ValidatePodLogOptions): tailLines ≥ 0, limitBytes ≥ 1, sinceSeconds ≥ 1, and at most one of sinceSeconds
// and sinceTime. The errors name the parameter; the caller refuses the request as Invalid PodLogOptions.
func PodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	return errs
}
