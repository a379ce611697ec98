// Package authorization is authorization.k8s.io/v1: SubjectAccessReview, LocalSubjectAccessReview,
// SelfSubjectAccessReview and SelfSubjectRulesReview, create-only as in kube-apiserver. A review asks the
// API server's authorizer about a request without making it (`kubectl auth can-i`); nothing is stored.
package authorization

import (
	"context"
	"fmt"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// RuleLister lists the RBAC rules bound to a user cluster-wide and in a namespace (for
// SelfSubjectRulesReview); the error means the list may be incomplete.
type RuleLister func(u user.Info, namespace string) ([]rbacv1.PolicyRule, error)

// NewStorage returns the four review resources over az (the API server's authorizer) and rules.
func NewStorage(az authorizer.Authorizer, rules RuleLister) map[string]rest.Storage {
	return map[string]rest.Storage{
		"subjectaccessreviews":      &review{az: az, kind: "SubjectAccessReview"},
		"selfsubjectaccessreviews":  &review{az: az, kind: "SelfSubjectAccessReview"},
		"localsubjectaccessreviews": &review{az: az, kind: "LocalSubjectAccessReview", namespaced: true},
		"selfsubjectrulesreviews":   &rulesReview{rules: rules},
	}
}

// review is one of the access reviews.
type review struct {
	az         authorizer.Authorizer
	kind       string
	namespaced bool
}

var (
	_ rest.Creater              = &review{}
	_ rest.Scoper               = &review{}
	_ rest.SingularNameProvider = &review{}
)

// New returns an empty review of the endpoint's kind.
func (r *review) New() runtime.Object {
	switch r.kind {
	case "SelfSubjectAccessReview":
		return &authorizationv1.SelfSubjectAccessReview{}
	case "LocalSubjectAccessReview":
		return &authorizationv1.LocalSubjectAccessReview{}
	}
	return &authorizationv1.SubjectAccessReview{}
}

// Destroy is a no-op.
func (r *review) Destroy() {}

// NamespaceScoped is true for LocalSubjectAccessReview only.
func (r *review) NamespaceScoped() bool { return r.namespaced }

// GetSingularName is the lower-case kind.
func (r *review) GetSingularName() string {
	switch r.kind {
	case "SelfSubjectAccessReview":
		return "selfsubjectaccessreview"
	case "LocalSubjectAccessReview":
		return "localsubjectaccessreview"
	}
	return "subjectaccessreview"
}

// Create evaluates the review: 422 when the spec is malformed (not exactly one of resourceAttributes and
// nonResourceAttributes, no user or group for a SubjectAccessReview, a LocalSubjectAccessReview whose
// resourceAttributes.namespace differs from its namespace), otherwise the review with status.allowed,
// status.denied and status.reason set by the authorizer.
func (r *review) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	var spec authorizationv1.SubjectAccessReviewSpec
	var status *authorizationv1.SubjectAccessReviewStatus
	var u user.Info
	var errs field.ErrorList
	sp := field.NewPath("spec")
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		ru, ok := genericapirequest.UserFrom(ctx)
		if !ok {
			return nil, apierrors.NewBadRequest("no user present on request")
		}
		u = ru
		spec = authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: o.Spec.ResourceAttributes, NonResourceAttributes: o.Spec.NonResourceAttributes}
		status = &o.Status
	case *authorizationv1.SubjectAccessReview:
		spec, status = o.Spec, &o.Status
		if spec.User == "" && len(spec.Groups) == 0 {
			errs = append(errs, field.Invalid(sp.Child("user"), spec.User, "at least one of user or group must be specified"))
		}
		u = specUser(spec)
	case *authorizationv1.LocalSubjectAccessReview:
		spec, status = o.Spec, &o.Status
		if spec.User == "" && len(spec.Groups) == 0 {
			errs = append(errs, field.Invalid(sp.Child("user"), spec.User, "at least one of user or group must be specified"))
		}
		ns := genericapirequest.NamespaceValue(ctx)
		if o.Namespace == "" {
			o.Namespace = ns
		}
		if o.Namespace != ns {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), o.Namespace, "must match the namespace of the request"))
		}
		if spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(sp.Child("nonResourceAttributes"), spec.NonResourceAttributes, "disallowed on this kind of request"))
		}
		if spec.ResourceAttributes != nil && spec.ResourceAttributes.Namespace != ns {
			errs = append(errs, field.Invalid(sp.Child("resourceAttributes", "namespace"), spec.ResourceAttributes.Namespace, "must match metadata.namespace"))
		}
		u = specUser(spec)
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", r.kind, obj))
	}
	if (spec.ResourceAttributes == nil) == (spec.NonResourceAttributes == nil) {
		errs = append(errs, field.Invalid(sp.Child("resourceAttributes"), spec.ResourceAttributes, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind(r.kind).GroupKind(), "", errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	d, reason, err := r.az.Authorize(ctx, Attributes(u, spec))
	*status = authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return obj, nil
}

func specUser(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	extra := map[string][]string{}
	for k, v := range spec.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
}

// Attributes converts a review's spec into the authorizer's request attributes for user u.
func Attributes(u user.Info, spec authorizationv1.SubjectAccessReviewSpec) authorizer.AttributesRecord {
	if n := spec.NonResourceAttributes; n != nil {
		return authorizer.AttributesRecord{User: u, Verb: n.Verb, Path: n.Path}
	}
	a := spec.ResourceAttributes
	return authorizer.AttributesRecord{User: u, Verb: a.Verb, Namespace: a.Namespace, APIGroup: a.Group, APIVersion: a.Version,
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name, ResourceRequest: true}
}

// rulesReview is SelfSubjectRulesReview: the rules the requesting user holds in spec.namespace.
type rulesReview struct{ rules RuleLister }

var (
	_ rest.Creater              = &rulesReview{}
	_ rest.Scoper               = &rulesReview{}
	_ rest.SingularNameProvider = &rulesReview{}
)

// New returns an empty SelfSubjectRulesReview.
func (r *rulesReview) New() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }

// Destroy is a no-op.
func (r *rulesReview) Destroy() {}

// NamespaceScoped is false.
func (r *rulesReview) NamespaceScoped() bool { return false }

// GetSingularName is "selfsubjectrulesreview".
func (r *rulesReview) GetSingularName() string { return "selfsubjectrulesreview" }

// Create lists the user's rules in spec.namespace (400 without one): system:masters holds everything;
// other users hold their RBAC rules. Rules other authorizers grant (a node's) are not listed, so the
// review says incomplete for them, as kube-apiserver's Node authorizer does.
func (r *rulesReview) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	rr, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectRulesReview: %T", obj))
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if rr.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	var rules []rbacv1.PolicyRule
	var err error
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		rules = []rbacv1.PolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
			{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
		}
	} else {
		rules, err = r.rules(u, rr.Spec.Namespace)
	}
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, p := range rules {
		if len(p.Resources) > 0 {
			st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: p.Verbs, APIGroups: p.APIGroups, Resources: p.Resources, ResourceNames: p.ResourceNames})
		}
		if len(p.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs})
		}
	}
	if err != nil {
		st.EvaluationError = err.Error()
		st.Incomplete = true
	}
	for _, g := range u.GetGroups() {
		if g == user.NodesGroup {
			st.Incomplete = true
		}
	}
	rr.Status = st
	return rr, nil
}
