package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rbacName checks an RBAC object's name: any valid path segment (colons allowed: "system:node"), as
// kube-apiserver's ValidateRBACName.
func rbacName(m *metav1.ObjectMeta) field.ErrorList {
	return Name(m, func(name string, _ bool) []string { return path.IsValidPathSegmentName(name) })
}

// Role validates a Role: its rules (no non-resource URLs in a namespaced role).
func Role(r *rbacv1.Role) field.ErrorList {
	errs := rbacName(&r.ObjectMeta)
	for i, rule := range r.Rules {
		errs = append(errs, policyRule(rule, true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ClusterRole validates a ClusterRole: its rules and, when set, its aggregationRule (at least one valid
// label selector).
func ClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := rbacName(&r.ObjectMeta)
	for i, rule := range r.Rules {
		errs = append(errs, policyRule(rule, false, field.NewPath("rules").Index(i))...)
	}
	if a := r.AggregationRule; a != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(a.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range a.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&a.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		}
	}
	return errs
}

func policyRule(r rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(r.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// RoleBinding validates a RoleBinding: roleRef names a Role or ClusterRole of
// rbac.authorization.k8s.io, and its subjects.
func RoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := rbacName(&b.ObjectMeta)
	errs = append(errs, roleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	for i, s := range b.Subjects {
		errs = append(errs, subject(s, true, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ClusterRoleBinding validates a ClusterRoleBinding: roleRef names a ClusterRole, and its subjects
// (ServiceAccounts need a namespace).
func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := rbacName(&b.ObjectMeta)
	errs = append(errs, roleRef(b.RoleRef, []string{"ClusterRole"})...)
	for i, s := range b.Subjects {
		errs = append(errs, subject(s, false, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// RoleRefUpdate refuses a change of a binding's roleRef, which kube-apiserver keeps immutable.
func RoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(ref, old) {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}

func roleRef(r rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if r.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), r.APIGroup, []string{rbacv1.GroupName}))
	}
	ok := false
	for _, k := range kinds {
		ok = ok || r.Kind == k
	}
	if !ok {
		errs = append(errs, field.NotSupported(p.Child("kind"), r.Kind, kinds))
	}
	if r.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range path.IsValidPathSegmentName(r.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), r.Name, msg))
		}
	}
	return errs
}

func subject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}
